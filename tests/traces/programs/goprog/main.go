// A static Go program that exercises the runtime's system calls: goroutines on several threads,
// timers, the garbage collector under allocation, os/exec, files and time.Sleep.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"time"
)

func main() {
	var wg sync.WaitGroup
	results := make([]int, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			s := 0
			for i := 0; i < 200000; i++ {
				s += i % (g + 1)
			}
			results[g] = s
		}(g)
	}
	wg.Wait()
	fmt.Println("goroutines:", results[7])

	timer := time.NewTimer(20 * time.Millisecond)
	ticker := time.NewTicker(5 * time.Millisecond)
	ticks := 0
loop:
	for {
		select {
		case <-ticker.C:
			ticks++
		case <-timer.C:
			break loop
		}
	}
	ticker.Stop()
	fmt.Println("ticks >= 2:", ticks >= 2)

	var keep [][]byte
	for i := 0; i < 2000; i++ {
		b := make([]byte, 64<<10)
		b[0] = byte(i)
		if i%100 == 0 {
			keep = append(keep, b)
		}
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Println("gc cycles > 0:", ms.NumGC > 0, "kept", len(keep))

	dir, err := os.MkdirTemp("", "goprog")
	if err != nil {
		panic(err)
	}
	path := filepath.Join(dir, "f.txt")
	if err := os.WriteFile(path, []byte("hello file\n"), 0o644); err != nil {
		panic(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	fmt.Print("file: ", string(data))
	os.RemoveAll(dir)

	out, err := exec.Command("/bin/echo", "from", "child").Output()
	fmt.Printf("exec: %q %v\n", out, err)

	start := time.Now()
	time.Sleep(10 * time.Millisecond)
	fmt.Println("slept >= 10ms:", time.Since(start) >= 10*time.Millisecond)
}
