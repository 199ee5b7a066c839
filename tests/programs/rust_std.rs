//! rust-std-test: the Rust standard library (aarch64-unknown-linux-musl, statically linked with
//! rust-lld) on the kernel: output, arguments and environment, threads joined after sleeping,
//! Mutex + Condvar, channels, Instant and SystemTime, a HashMap (std's RandomState seeds it from
//! getrandom), and a panic caught in a thread. Prints "ok - NAME" / "FAIL - NAME: why" per case
//! and "N passed, N failed" last (scripts/test counts it). With the argument `panic` it panics
//! in main instead, which std turns into exit status 101. Built by scripts/test; runs unchanged
//! on Linux.
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn threads_sleep_and_join() -> Result<(), String> {
    let start = Instant::now();
    let ready = Arc::new(std::sync::Barrier::new(8));
    let handles: Vec<_> = (0..8u64)
        .map(|i| {
            let ready = ready.clone();
            std::thread::spawn(move || {
                ready.wait();
                let t = Instant::now();
                std::thread::sleep(Duration::from_millis(120));
                (i, t, Instant::now())
            })
        })
        .collect();
    let (mut last_start, mut first_end) = (start, None::<Instant>);
    for (want, h) in handles.into_iter().enumerate() {
        let (i, began, ended) = h.join().map_err(|_| "a thread panicked")?;
        if i != want as u64 || ended - began < Duration::from_millis(120) {
            return Err(format!("thread {i} slept {:?}", ended - began));
        }
        last_start = last_start.max(began);
        first_end = Some(first_end.map_or(ended, |e| e.min(ended)));
    }
    println!("    8 threads slept 120 ms each in {} ms", start.elapsed().as_millis());
    // The sleeps overlap (a sleeping thread holds no CPU): at one moment all eight were asleep,
    // however slowly the machine runs.
    match first_end {
        Some(end) if last_start < end => Ok(()),
        _ => Err("the sleeps did not overlap".into()),
    }
}

fn mutex_and_condvar() -> Result<(), String> {
    let pair = Arc::new((Mutex::new(0u32), Condvar::new()));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let pair = pair.clone();
            std::thread::spawn(move || {
                for _ in 0..5000 {
                    *pair.0.lock().unwrap() += 1;
                }
                pair.1.notify_all();
            })
        })
        .collect();
    let (lock, cond) = &*pair;
    let guard = cond.wait_while(lock.lock().unwrap(), |n| *n < 20_000).unwrap();
    if *guard != 20_000 {
        return Err(format!("count {}", *guard));
    }
    drop(guard);
    workers.into_iter().for_each(|w| w.join().unwrap());
    let (_guard, timeout) = cond.wait_timeout(lock.lock().unwrap(), Duration::from_millis(80)).unwrap();
    if !timeout.timed_out() { Err("wait_timeout did not time out".into()) } else { Ok(()) }
}

fn channels() -> Result<(), String> {
    let (tx, rx) = mpsc::channel();
    for t in 0..3u64 {
        let tx = tx.clone();
        std::thread::spawn(move || (0..100).for_each(|i| tx.send(t * 1000 + i).unwrap()));
    }
    drop(tx);
    let sum: u64 = rx.iter().sum();
    if sum == 3 * 4950 + 100 * 3000 { Ok(()) } else { Err(format!("sum {sum}")) }
}

fn clocks() -> Result<(), String> {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_err(|e| e.to_string())?.as_secs();
    if secs < 1_704_067_200 {
        return Err(format!("SystemTime says {secs} s since 1970 (before 2024)"));
    }
    let t = Instant::now();
    std::thread::sleep(Duration::from_millis(50));
    let e = t.elapsed();
    if e < Duration::from_millis(50) || e > Duration::from_millis(300) { Err(format!("slept {e:?}")) } else { Ok(()) }
}

fn panic_in_a_thread_is_caught() -> Result<(), String> {
    let r = std::thread::spawn(|| {
        if std::hint::black_box(true) {
            panic!("deliberate");
        }
    })
    .join();
    if r.is_err() { Ok(()) } else { Err("join did not report the panic".into()) }
}

fn hash_map() -> Result<(), String> {
    let mut m: HashMap<u64, String> = HashMap::new();
    for i in 0..10_000u64 {
        m.insert(i * 7919, format!("v{i}"));
    }
    for i in (0..10_000u64).step_by(2) {
        m.remove(&(i * 7919));
    }
    let sum: u64 = m.keys().sum();
    let want: u64 = (0..10_000u64).filter(|i| i % 2 == 1).map(|i| i * 7919).sum();
    match (m.len(), m.get(&7919).map(String::as_str)) {
        (5000, Some("v1")) if sum == want => Ok(()),
        (len, one) => Err(format!("len {len}, m[7919] = {one:?}, key sum {sum} (want {want})")),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    println!("    args {:?}, HOME={:?}", args, std::env::var("HOME").ok());
    if args.get(1).map(String::as_str) == Some("panic") {
        panic!("deliberate panic in main");
    }
    let cases: [(&str, fn() -> Result<(), String>); 6] = [
        ("threads_sleep_and_join", threads_sleep_and_join),
        ("mutex_and_condvar", mutex_and_condvar),
        ("channels", channels),
        ("clocks", clocks),
        ("hash_map", hash_map),
        ("panic_in_a_thread_is_caught", panic_in_a_thread_is_caught),
    ];
    let (mut passed, mut failed) = (0, 0);
    for (name, case) in cases {
        match case() {
            Ok(()) => {
                passed += 1;
                println!("ok - {name}");
            }
            Err(why) => {
                failed += 1;
                println!("FAIL - {name}: {why}");
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    std::process::exit(i32::from(failed != 0));
}
