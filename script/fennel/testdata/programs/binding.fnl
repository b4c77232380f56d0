;;;; let-simple
(let [x 1 y 2] (print x y))
;;;; let-shadow
(let [x 1] (let [x (+ x 1)] (print x)) (print x))
;;;; let-sequential
(let [a 1 b (+ a 1) c (* b 2)] (print a b c))
;;;; let-value
(print (let [x 5] (* x x)))
;;;; let-multi-body
(let [x 1] (print :first) (print :second x))
;;;; let-multivalue
(let [(a b c) (values 1 2 3)] (print a b c))
;;;; let-multivalue-short
(let [(a b c) (values 1 2)] (print a b c))
;;;; let-multivalue-fn
(fn two [] (values :x :y))
(let [(a b) (two)] (print a b))
;;;; let-seq
(let [[a b c] [1 2 3]] (print a b c))
;;;; let-seq-short
(let [[a b c] [1]] (print a b c))
;;;; let-seq-rest
(let [[a & rest] [1 2 3 4]] (print a (length rest) (table.concat rest ",")))
;;;; let-seq-rest-empty
(let [[a b & rest] [1]] (print a b (length rest)))
;;;; let-seq-as
(let [[a b &as all] [1 2 3]] (print a b (length all)))
;;;; let-seq-rest-as
(let [[a & rest &as all] [1 2 3]] (print a (length rest) (length all)))
;;;; let-table
(let [{:a a :b b} {:a 1 :b 2}] (print a b))
;;;; let-table-short
(let [{: a : b} {:a 1 :b 2}] (print a b))
;;;; let-table-rename
(let [{:name n :age years} {:name "Ann" :age 30}] (print n years))
;;;; let-table-missing
(let [{: a : z} {:a 1}] (print a z))
;;;; let-table-as
(let [{: a &as t} {:a 1 :b 2}] (print a t.b))
;;;; let-table-numkeys
(let [{1 one 2 two} [:x :y]] (print one two))
;;;; let-table-strkeys
(let [{"with space" ws "dash-key" dk} {"with space" 1 "dash-key" 2}] (print ws dk))
;;;; let-nested
(let [{: pos :tags [first second]} {:pos {:x 1 :y 2} :tags [:a :b]}
      {: x : y} pos]
  (print x y first second))
;;;; let-nested-deep
(let [[[a [b]] {:c {:d d}}] [[1 [2]] {:c {:d 3}}]] (print a b d))
;;;; let-seq-in-table
(let [{:list [h & t]} {:list [1 2 3]}] (print h (length t)))
;;;; let-underscore
(let [[_ b] [1 2]] (print b))
;;;; let-nil-value
(let [x nil] (print x))
;;;; let-fn-value
(let [f (fn [x] (* x 2))] (print (f 21)))
;;;; let-if-value
(let [x (if true :yes :no)] (print x))
;;;; let-do-value
(let [x (do (print :side) 42)] (print x))
;;;; let-shadow-global
(let [print (fn [...] (_G.print "custom" ...))] (print 1))
(print :back)
;;;; let-shadow-type
(let [type "shadowed"] (print type (case [1] [a] a)))
;;;; let-shadow-table
(let [table {:x 1}] (let [[a b] [1 2 3]] (print table.x a b)))
;;;; local-simple
(local x 10)
(print x)
;;;; local-destructure
(local {: a : b} {:a 1 :b 2})
(local [c d] [3 4])
(print a b c d)
;;;; local-multi
(local (p q) (values 1 2))
(print p q)
;;;; local-in-fn
(fn f [] (local y 5) (* y 2))
(print (f))
;;;; local-in-expression-error !error
(print (local z 1))
;;;; var-set
(var x 1)
(set x (+ x 1))
(print x)
;;;; var-set-destructure
(var a 1)
(var b 2)
(set [a b] [b a])
(print a b)
;;;; var-set-multi
(var a 1)
(var b 2)
(set (a b) (values 10 20))
(print a b)
;;;; var-set-table-destructure
(var x 0)
(var y 0)
(set {: x : y} {:x 5 :y 6})
(print x y)
;;;; var-closure
(var count 0)
(fn inc [] (set count (+ count 1)))
(inc)
(inc)
(print count)
;;;; var-in-let-closure
(let [counter (do (var n 0) (fn [] (set n (+ n 1)) n))]
  (counter)
  (print (counter)))
;;;; set-field
(local t {})
(set t.b {})
(set t.b.c 2)
(print t.a t.b.c)
;;;; set-index
(local t {})
(set (. t :key) :v)
(set (. t 1) :one)
(print t.key (. t 1))
;;;; set-field-global
(set string.custom-field 7)
(print (. string :custom-field))
;;;; tset
(local t {})
(tset t :a 1)
(tset t 1 :x)
(print t.a (. t 1))
;;;; tset-nested
(local t {:a {:b {}}})
(tset t :a :b :c 42)
(print t.a.b.c)
;;;; tset-computed
(local t {})
(for [i 1 3] (tset t i (* i i)))
(print (table.concat t " "))
;;;; global-set
(global my-global-val 99)
(print my-global-val)
;;;; global-plain
(global gx 5)
(print gx _G.gx)
;;;; set-local-error !error
(local x 1)
(set x 2)
;;;; set-unknown-global
(set undefined-thing 2)
(print undefined-thing)
;;;; let-odd-error !error
(let [x] x)
;;;; let-no-body-error !error
(let [x 1])
;;;; let-bad-binding-error !error
(let [1 2] 3)
;;;; let-not-seq-error !error
(let (x 1) x)
;;;; let-multisym-error !error
(let [a.b 1] a)
;;;; local-special-name-error !error
(local if 1)
;;;; rest-not-last-error !error
(let [[a & b c] [1 2 3]] a)
;;;; nested-multi-error !error
(let [[(a b)] [1]] a)
