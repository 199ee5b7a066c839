;; Racket CS (Chez Scheme), run as `setarch -X racket -f /parity/racket-jit.rktl` from a root
;; image of scripts/rootfs racket (tests/linux-parity/cases): code evaluated in a fresh namespace
;; and compiled at run time (Chez's code segments), a closure made by the compiled code, each
;; printed on a line starting "racket:" (what the parity check compares); then every executable
;; mapping of /proc/self/maps (which scripts/test checks lie in one code window with racket's
;; text; Linux's do not).
(define ns (make-base-namespace))
(define sq (eval '(lambda (x) (* x x)) ns))
(printf "racket: eval'd lambda: (sq 12) = ~a\n" (sq 12))
(define c (compile '(let loop ([i 0] [s 0]) (if (= i 1000000) s (loop (add1 i) (+ s i))))))
(printf "racket: compiled loop: ~a\n" (eval c))
(define adder (eval '(lambda (n) (lambda (x) (+ x n))) ns))
(printf "racket: closure from compiled code: ((adder 5) 37) = ~a\n" ((adder 5) 37))
(define fib (eval '(letrec ([f (lambda (n) (if (< n 2) n (+ (f (- n 1)) (f (- n 2)))))]) f) ns))
(printf "racket: (fib 25) = ~a\n" (fib 25))
(call-with-input-file "/proc/self/maps"
  (lambda (in)
    (for ([l (in-lines in)])
      (define m (regexp-match #px"^[0-9a-f]+-[0-9a-f]+ (\\S+) " l))
      (when (and m (regexp-match? #rx"x" (cadr m))) (displayln l)))))
;; The process's CPU time (not compared: a figure for the benchmark page).
(printf "time: ~a ms of CPU\n" (current-process-milliseconds))
(printf "racket: done\n")
