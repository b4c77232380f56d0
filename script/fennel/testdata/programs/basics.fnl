;;;; hello
(print "hello" 1 2.5 true nil)
;;;; arith
(print (+ 1 2) (- 5 3) (* 2 3) (/ 7 2) (// 7 2) (% 7 3) (^ 2 10) (- 4) (/ 4))
;;;; concat
(print (.. "a" "b" 1 2) (..) (.. "x"))
;;;; let-destructure
(let [{: a : b} {:a 1 :b 2} [x y & r] [10 20 30 40]] (print a b x y (length r) (. r 2)))
;;;; if-values
(print (if false 1 (values 2 3)))
;;;; case-where
(print (case [5] (where [a] (> a 0)) a))
;;;; view
(print (fennel.view {:a 1 :b [1 2 "x"] :c {:d true}}))
;;;; error-call-literal !error
("x" 1)
