;; The fill scenario with Racket CS (scripts/bench section 14): Racket's FFI `mmap` takes the free
;; address space between the mmap area's next placement and the 4 GiB boundary below it (PROT_NONE
;; reservations, halving the size when one would cross), then new code is compiled (3,000
;; procedures evaluated in a fresh namespace: more than Chez Scheme's code segments hold, so it
;; maps new ones). Prints the text's address, the boundary, and where each new code segment went.
;; On Linux the new segments land past the boundary, 4 GiB and more from the code before them;
;; here code goes into the window of the text whatever the data took.
(require ffi/unsafe)
(define mmap (get-ffi-obj "mmap" #f (_fun _uintptr _size _int _int _int _intptr -> _uintptr)))
(define PROT_NONE 0)
(define flags (bitwise-ior #x2 #x20 #x4000)) ; MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE
(define MAP_FAILED (sub1 (arithmetic-shift 1 64)))
(define G4 (arithmetic-shift 1 32))
(define (executable)
  (call-with-input-file "/proc/self/maps"
    (lambda (in)
      (for*/list ([l (in-lines in)]
                  [m (in-value (regexp-match #px"^([0-9a-f]+)-([0-9a-f]+) (\\S+) \\S+ \\S+ \\S+ *(.*)$" l))]
                  #:when (and m (regexp-match? #rx"x" (list-ref m 3))))
        (list (string->number (list-ref m 1) 16) (string->number (list-ref m 2) 16) (list-ref m 4))))))
(define before (executable))
(define text (findf (lambda (x) (regexp-match? #rx"bin/racket$" (caddr x))) before))
(define first (mmap 0 (arithmetic-shift 1 24) PROT_NONE flags -1 0))
(define boundary (* G4 (quotient first G4)))
(define taken
  (let loop ([size (arithmetic-shift 1 28)] [n 1])
    (if (< size 4096)
        n
        (let ([a (mmap 0 size PROT_NONE flags -1 0)])
          (if (or (= a MAP_FAILED) (< a boundary)) (loop (quotient size 2) n) (loop size (add1 n)))))))
(printf "fill: text ~x, boundary ~x, ~a reservations from ~x\n" (car text) boundary taken first)
(define ns (make-base-namespace))
(for ([i 3000])
  (eval `(define (,(string->symbol (format "f~a" i)) x)
           (let loop ([k x] [acc 0])
             (if (= k 0) acc (loop (- k 1) (+ acc (* k ,i) (quotient k 3) (remainder k 7))))))
        ns))
(printf "fill: (f2999 10) = ~a\n" (eval '(f2999 10) ns))
(for ([s (executable)] #:unless (or (member s before) (not (string=? (caddr s) ""))))
  (printf "fill: new code ~x-~x\n" (car s) (cadr s)))
