;;;; unclosed-paren-error !error
(print 1
;;;; unclosed-string-error !error
(print "abc)
;;;; extra-closer-error !error
(print 1))
;;;; mismatched-error !error
(print [1 2)
;;;; odd-table-error !error
(print {:a 1 :b})
;;;; bad-number-error !error
(print 12abc)
;;;; bad-escape-error !error
(print "\q")
;;;; tilde-error !error
(print ~a)
;;;; malformed-multisym-error !error
(print a..b)
;;;; method-not-last-error !error
(print (a:b.c))
;;;; trailing-colon-error !error
(print a:)
;;;; at-sign-error !error
(print @a)
;;;; quote-error !error
(print 'x)
;;;; unquote-error !error
(print ,x)
;;;; import-macros-error !error
(import-macros {: m} :some.module)
;;;; require-macros-error !error
(require-macros :some.module)
;;;; tset-too-few-error !error
(tset {} :a)
;;;; dot-no-args-error !error
(.)
;;;; not-many-args-error !error
(not 1 2)
;;;; set-no-value-error !error
(var x 1)
(set x)
;;;; local-no-value-error !error
(local x)
;;;; runtime-arith-error !error
(print (+ 1 {}))
;;;; runtime-concat-nil-error !error
(print (.. "a" nil))
;;;; runtime-compare-error !error
(print (< 1 "x"))
;;;; icollect-into-nil
(print (length (icollect [_ v (ipairs [1 2 3]) &into []] (if (= v 1) nil v))))
;;;; runtime-destructure-nil !error
(let [[a] nil] a)
;;;; runtime-method-missing !error
(local o {})
(o:missing)
;;;; runtime-error-table-value !error
(error {:msg "structured"})
;;;; runtime-assert !error
(assert false "assertion message")
;;;; runtime-lambda-rest-ok
(local f (lambda [x ?y & rest] (.. x (or ?y "-") (length rest))))
(print (f :a) (f :a :b :c :d))
;;;; unicode-symbols
(local café 1)
(local π 3.14)
(print café π)
;;;; shebang-like-comment
;; #!/not/a/shebang
(print :ok)
;;;; whitespace-variety
(print	1
	2)
;;;; nested-fn-varargs
(fn outer [...] (let [inner (fn [...] (select "#" ...))] (.. (inner 1) (select "#" ...))))
(print (outer :a :b :c))
;;;; iife-varargs
(fn f [...] (print (let [x 1] (values x ...))))
(f 2 3)
;;;; table-computed-keys
(local k :dyn)
(local t {k 1 (.. k "2") 2 [1] 3})
(print t.dyn t.dyn2)
;;;; table-nil-value
(local t {:a nil :b 1})
(print t.a t.b)
;;;; table-fn-values
(local t {:f (fn [x] (* x 2)) :g #(+ $ 1)})
(print (t.f 2) (t.g 2))
;;;; seq-trailing-call
(fn mv [] (values 1 2 3))
(print (length [0 (mv)]) (length [(mv) 0]))
;;;; string-long
(print (length (string.rep "ab" 1000)))
;;;; deep-let-chain
(let [a 1] (let [b (+ a 1)] (let [c (+ b 1)] (let [d (+ c 1)] (print a b c d)))))
;;;; statement-expression-discard
(+ 1 2)
"string"
(print :after)
;;;; global-then-local
(global gv 1)
(local gv 2)
(print gv _G.gv)
;;;; with-open-basic
(local h {:closed false})
(fn h.close [self] (set self.closed true))
(print (with-open [f h] (type f)) h.closed)
;;;; comment-form
(comment this is ignored (even "forms"))
(print (comment x) :after)
;;;; length-operator-hash
(print (# "abc") (# [1 2]))
;;;; string-keyword-methods
(print (: :abc :len) (: "x,y" :find ","))
;;;; varargs-in-table-middle
(fn f [...] [... :end])
(print (length (f 1 2 3)))
;;;; values-in-if-cond
(print (if (values false true) :yes :no))
;;;; while-false
(while false (print :never))
(print :ok)
;;;; nested-case-in-fn
(fn kind [x] (case (type x) :number (if (> x 0) :pos :nonpos) :string (case x "" :empty _ :str) _ :other))
(print (kind 1) (kind -1) (kind "") (kind "a") (kind {}))
