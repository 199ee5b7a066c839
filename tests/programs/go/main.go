// go-test: the Go runtime and standard library (a static GOOS=linux GOARCH=arm64 build, no cgo,
// no modules beyond the standard library) on the kernel: goroutines and channels, timers and
// tickers, time.Sleep, a garbage collection under allocation (64 MiB and more allocated in a
// loop), os/exec of /busybox capturing its output, files in /tmp (WriteFile, ReadFile, ReadDir,
// Rename, Remove, Stat), and os/signal. Prints "ok - NAME" or "FAIL - NAME: why" per case and
// "N passed, N failed" last, like tests/programs/check.h; exits 1 when a case failed. The parity
// cases run it with GOMAXPROCS=1 and GOMAXPROCS=4 (tests/linux-parity/cases). Built by
// scripts/lib.sh (build_linux_programs) with CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build.
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

func goroutines() error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	sum := 0
	for i := 1; i <= 1000; i++ {
		wg.Add(1)
		go func(n int) {
			defer wg.Done()
			mu.Lock()
			sum += n
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	if sum != 500500 {
		return fmt.Errorf("sum %d", sum)
	}
	if want := os.Getenv("GOMAXPROCS"); want != "" {
		if n, _ := strconv.Atoi(want); runtime.GOMAXPROCS(0) != n {
			return fmt.Errorf("GOMAXPROCS %d, environment says %s", runtime.GOMAXPROCS(0), want)
		}
	}
	return nil
}

func channels() error {
	unbuffered := make(chan int)
	results := make(chan int, 10)
	for w := 0; w < 4; w++ {
		go func() {
			for v := range unbuffered {
				results <- v * v
			}
		}()
	}
	go func() {
		for i := 1; i <= 10; i++ {
			unbuffered <- i
		}
		close(unbuffered)
	}()
	total := 0
	for i := 0; i < 10; i++ {
		total += <-results
	}
	if total != 385 {
		return fmt.Errorf("sum of squares %d", total)
	}
	never := make(chan int)
	select {
	case <-never:
		return errors.New("received from a silent channel")
	case <-time.After(30 * time.Millisecond):
	}
	closed := make(chan int)
	close(closed)
	if v, ok := <-closed; ok || v != 0 {
		return errors.New("a closed channel")
	}
	return nil
}

func timersAndTickers() error {
	start := time.Now()
	t := time.NewTimer(50 * time.Millisecond)
	<-t.C
	if e := time.Since(start); e < 50*time.Millisecond {
		return fmt.Errorf("the timer fired after %v", e)
	}
	stopped := time.NewTimer(time.Hour)
	if !stopped.Stop() {
		return errors.New("Stop of a pending timer")
	}
	start = time.Now()
	ticker := time.NewTicker(20 * time.Millisecond)
	for i := 0; i < 5; i++ {
		<-ticker.C
	}
	ticker.Stop()
	if e := time.Since(start); e < 100*time.Millisecond {
		return fmt.Errorf("5 ticks of 20 ms in %v", e)
	}
	done := make(chan struct{})
	time.AfterFunc(10*time.Millisecond, func() { close(done) })
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		return errors.New("AfterFunc did not run")
	}
	return nil
}

func sleep() error {
	start := time.Now()
	time.Sleep(50 * time.Millisecond)
	if e := time.Since(start); e < 50*time.Millisecond {
		return fmt.Errorf("slept %v", e)
	}
	// Many goroutines sleeping at once overlap.
	var wg sync.WaitGroup
	start = time.Now()
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); time.Sleep(100 * time.Millisecond) }()
	}
	wg.Wait()
	if e := time.Since(start); e < 100*time.Millisecond || e > 2*time.Second {
		return fmt.Errorf("50 sleeps of 100 ms took %v", e)
	}
	return nil
}

var keep [][]byte

func gcUnderAllocation() error {
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < 128; i++ {
		b := make([]byte, 1<<20)
		b[0], b[len(b)-1] = byte(i), byte(i)
		if i%16 == 0 {
			keep = append(keep, b) // some survive
		}
		if i%32 == 31 {
			runtime.GC()
		}
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if after.NumGC-before.NumGC < 4 {
		return fmt.Errorf("%d collections", after.NumGC-before.NumGC)
	}
	if after.TotalAlloc-before.TotalAlloc < 64<<20 {
		return fmt.Errorf("allocated %d bytes", after.TotalAlloc-before.TotalAlloc)
	}
	if after.HeapAlloc > 48<<20 {
		return fmt.Errorf("live heap %d bytes after GC (8 MiB kept)", after.HeapAlloc)
	}
	for i, b := range keep {
		if b[0] != byte(i*16) || b[len(b)-1] != byte(i*16) {
			return fmt.Errorf("kept slice %d changed", i)
		}
	}
	return nil
}

func execBusybox() error {
	out, err := exec.Command("/busybox", "echo", "hello", "from go").Output()
	if err != nil || string(out) != "hello from go\n" {
		return fmt.Errorf("echo: %q %v", out, err)
	}
	err = exec.Command("/busybox", "false").Run()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
		return fmt.Errorf("false: %v", err)
	}
	cmd := exec.Command("/busybox", "tr", "a-z", "A-Z")
	cmd.Stdin = strings.NewReader("piped through\n")
	out, err = cmd.Output()
	if err != nil || string(out) != "PIPED THROUGH\n" {
		return fmt.Errorf("tr: %q %v", out, err)
	}
	cmd = exec.Command("/busybox", "sh", "-c", "echo $GREETING; exit 3")
	cmd.Env = []string{"GREETING=env passed"}
	out, err = cmd.Output()
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 3 || string(out) != "env passed\n" {
		return fmt.Errorf("sh: %q %v", out, err)
	}
	if _, err := exec.Command("/no/such/program").Output(); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("a missing program: %v", err)
	}
	return nil
}

func files() error {
	dir := "/tmp/go-test"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range []string{"b", "a", "c"} {
		if err := os.WriteFile(dir+"/"+name, []byte("file "+name), 0o644); err != nil {
			return err
		}
	}
	data, err := os.ReadFile(dir + "/a")
	if err != nil || string(data) != "file a" {
		return fmt.Errorf("ReadFile: %q %v", data, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !sort.StringsAreSorted(names) || strings.Join(names, ",") != "a,b,c" {
		return fmt.Errorf("ReadDir: %v", names)
	}
	if err := os.Rename(dir+"/a", dir+"/d"); err != nil {
		return err
	}
	st, err := os.Stat(dir + "/d")
	if err != nil || st.Size() != 6 || st.Mode() != 0o644 || st.IsDir() {
		return fmt.Errorf("Stat: %v %v", st, err)
	}
	if _, err := os.Stat(dir + "/a"); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("renamed away: %v", err)
	}
	f, err := os.OpenFile(dir+"/d", os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	f.WriteString("+more")
	f.Close()
	if data, _ := os.ReadFile(dir + "/d"); string(data) != "file a+more" {
		return fmt.Errorf("append: %q", data)
	}
	if err := os.Remove(dir + "/d"); err != nil {
		return err
	}
	if err := os.Remove(dir); err == nil {
		return errors.New("removed a non-empty directory")
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("RemoveAll: %v", err)
	}
	exe, err := os.Executable()
	if err != nil || exe != "/go-test" {
		return fmt.Errorf("os.Executable: %q %v", exe, err)
	}
	return nil
}

func signals() error {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	defer signal.Stop(ch)
	syscall.Kill(os.Getpid(), syscall.SIGUSR1)
	select {
	case s := <-ch:
		if s != syscall.SIGUSR1 {
			return fmt.Errorf("got %v", s)
		}
	case <-time.After(5 * time.Second):
		return errors.New("no SIGUSR1")
	}
	return nil
}

func main() {
	cases := []struct {
		name string
		run  func() error
	}{
		{"goroutines", goroutines},
		{"channels", channels},
		{"timers_and_tickers", timersAndTickers},
		{"sleep", sleep},
		{"gc_under_allocation", gcUnderAllocation},
		{"exec_busybox", execBusybox},
		{"files", files},
		{"signals", signals},
	}
	passed, failed := 0, 0
	for _, c := range cases {
		if err := c.run(); err != nil {
			failed++
			fmt.Printf("FAIL - %s: %v\n", c.name, err)
		} else {
			passed++
			fmt.Printf("ok - %s\n", c.name)
		}
	}
	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if failed != 0 {
		os.Exit(1)
	}
}
