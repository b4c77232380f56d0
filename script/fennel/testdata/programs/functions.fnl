;;;; fn-anon
(print ((fn [x] (* x 2)) 4))
;;;; fn-named
(fn add [a b] (+ a b))
(print (add 2 3))
;;;; fn-recursive
(fn fact [n] (if (<= n 1) 1 (* n (fact (- n 1)))))
(print (fact 10))
;;;; fn-mutual
(var is-odd nil)
(fn is-even [n] (if (= n 0) true (is-odd (- n 1))))
(set is-odd (fn [n] (if (= n 0) false (is-even (- n 1)))))
(print (is-even 10) (is-odd 7))
;;;; fn-docstring
(fn documented [x] "Doubles x." (* x 2))
(print (documented 5))
;;;; fn-only-docstring
(fn f [] "just a string")
(print (f))
;;;; fn-metadata
(fn g [x] {:fnl/docstring "meta"} (+ x 1))
(print (g 1))
;;;; fn-empty-body
(fn nothing [])
(print (nothing) (select "#" (nothing)))
;;;; fn-varargs
(fn count [...] (select "#" ...))
(print (count) (count 1 2 3) (count nil nil))
;;;; fn-varargs-pass
(fn first [...] (let [x ...] x))
(fn pass [...] (first ...))
(print (pass 7 8 9))
;;;; fn-varargs-table
(fn sum [...] (var s 0) (each [_ v (ipairs [...])] (set s (+ s v))) s)
(print (sum 1 2 3 4))
;;;; fn-rest
(fn f [a & more] (print a (length more) (. more 1)))
(f 1 2 3)
(f 1)
;;;; fn-rest-destructure
(fn f [a & [b c]] (print a b c))
(f 1 2 3)
;;;; fn-destructure-params
(fn f [{: name : age} [x y]] (print name age x y))
(f {:name "Bo" :age 3} [7 8])
;;;; fn-multiple-returns
(fn mv [] (values 1 2 3))
(print (mv))
(print (mv) :end)
(local t [(mv)])
(print (length t))
;;;; fn-closure
(fn make-adder [n] (fn [x] (+ x n)))
(local add5 (make-adder 5))
(print (add5 10))
;;;; fn-closure-counter
(fn counter [] (var c 0) (fn [] (set c (+ c 1)) c))
(local c1 (counter))
(c1)
(c1)
(print (c1))
;;;; fn-field-name
(local M {})
(fn M.greet [name] (.. "hi " name))
(print (M.greet "you"))
;;;; fn-nested-field-name
(local M {:sub {}})
(fn M.sub.f [] :deep)
(print (M.sub.f))
;;;; fn-returns-fn-value
(print (type (fn [] 1)))
;;;; fn-higher-order
(fn map [f xs] (icollect [_ x (ipairs xs)] (f x)))
(print (table.concat (map #(* $ 10) [1 2 3]) ","))
;;;; fn-immediate
(print ((fn [] (values :a :b))))
;;;; fn-question-param
(fn f [?x] (or ?x :default))
(print (f) (f :given))
;;;; fn-keyword-param
(fn f [end then] (.. end then))
(print (f :a :b))
;;;; fn-dashes
(fn f [parameters-as-json content-type] (.. parameters-as-json content-type))
(print (f "{}" "/json"))
;;;; fn-self-method
(local obj {:n 5})
(fn obj.get [self] self.n)
(print (obj:get))
;;;; fn-method-call-chain
(local o {:v 1})
(fn o.inc [self] (set self.v (+ self.v 1)) self)
(print (. (: (o:inc) :inc) :v))
;;;; fn-method-bad-name
(local o {"my-method" (fn [self x] (.. "got " x))})
(print (: o :my-method 1))
;;;; fn-method-multisym
(local o {:inner {:name "in" :hi (fn [self] (.. "hi " self.name))}})
(print (o.inner:hi))
;;;; lambda-ok
(local f (lambda [a b] (+ a b)))
(print (f 1 2))
;;;; lambda-optional
(local f (lambda [a ?b] (if ?b (+ a ?b) a)))
(print (f 1) (f 1 2))
;;;; lambda-missing !error
(local f (lambda [a b] (+ a b)))
(f 1)
;;;; lambda-unicode
(local f (λ [x] (* x 3)))
(print (f 3))
;;;; lambda-named
(lambda sq [x] (* x x))
(print (sq 4))
;;;; hashfn-basic
(print (#(+ $1 $2) 3 4))
;;;; hashfn-dollar
(print (#(* $ 2) 21))
;;;; hashfn-varargs
(print (#(select "#" $...) 1 2 3))
(print (length (#[$...] 1 2)))
;;;; hashfn-table
(print (. (#{:v $} 5) :v))
;;;; hashfn-seq
(print (table.concat (#[$3 $1] :a :b :c) ","))
;;;; hashfn-nested-field
(print (#$.name {:name "field"}))
;;;; hashfn-values
(print (#(values $2 $1) :x :y))
;;;; hashfn-const
(print (#:const))
;;;; hashfn-in-map
(local xs [1 2 3])
(print (table.concat (icollect [_ x (ipairs xs)] (#(+ $ 1) x)) " "))
;;;; partial-basic
(local add3 (partial + 3))
(print (add3 4))
;;;; partial-multi
(fn f [a b c] (.. a b c))
(print ((partial f :x :y) :z))
(print ((partial f :x) :y :z))
;;;; partial-eval-once
(var calls 0)
(fn arg [] (set calls (+ calls 1)) 10)
(local p (partial + (arg)))
(p 1)
(p 2)
(print (p 3) calls)
;;;; values-basic
(print (values 1 2 3))
;;;; values-empty
(print (select "#" (values)))
;;;; values-in-let
(let [(a b) (values 1 2)] (print (+ a b)))
;;;; values-truncated
(print (values 1 2) (values 3 4))
;;;; values-in-table
(local t [(values 1 2) (values 3 4)])
(print (length t) (. t 3))
;;;; pick-values
(print (pick-values 1 (values 1 2 3)))
(print (pick-values 2 (values 1 2 3)))
(print (select "#" (pick-values 0 (values 1 2))))
;;;; pick-values-pad
(print (pick-values 3 1))
;;;; tail-call
(fn loop [n acc] (if (= n 0) acc (tail! (loop (- n 1) (+ acc 1)))))
(print (loop 100000 0))
;;;; deep-tail-recursion
(fn down [n] (if (> n 0) (down (- n 1)) :done))
(print (down 50000))
;;;; tail-not-tail-error !error
(fn f [] (tail! (print 1)) 2)
;;;; varargs-outside-error !error
(fn f [x] ...)
;;;; vararg-not-last-error !error
(fn f [... x] x)
;;;; fn-no-params-error !error
(fn f)
;;;; fn-literal-param-error !error
(fn f [1] 1)
;;;; hashfn-mixed-error !error
#(+ $1 $...)
;;;; call-literal-error !error
(1 2 3)
;;;; call-nil-error !error
(nil)
;;;; empty-call-error !error
()
;;;; method-multisym-value-error !error
(local o {})
(print o:m)
;;;; special-as-value-error !error
(print if)
