;;;; simple
(macro twice [x] `(do ,x ,x))
(twice (print "hi"))

;;;; unless
(macro unless [c ...] `(if (not ,c) (do ,...)))
(unless false (print "ran") (print "again"))
(unless true (print "never"))

;;;; value
(macro add1 [x] `(+ ,x 1))
(print (add1 41) (add1 (add1 1)))

;;;; macros-table
(macros {:inc (fn [x] `(+ ,x 1))
         :dec (fn [x] `(- ,x 1))})
(print (inc 1) (dec 1) (inc (dec 5)))

;;;; gensym-hygiene
(macro swap! [a b] `(let [tmp# ,a] (set ,a ,b) (set ,b tmp#)))
(var tmp 1)
(var other 2)
(swap! tmp other)
(print tmp other)

;;;; explicit-gensym
(macro square [x]
  (let [v (gensym :v)]
    `(let [,v ,x] (* ,v ,v))))
(var calls 0)
(fn f [] (set calls (+ calls 1)) 7)
(print (square (f)) calls)

;;;; auto-gensym-shadow
(macro with-double [x body] `(let [d# (* 2 ,x)] (+ d# ,body)))
(local d 100)
(print (with-double 3 d))

;;;; nested-unquote
(macro make-adder [n] `(fn [x#] (+ x# ,(* n 10))))
(print ((make-adder 4) 2))

;;;; splice-unpack
(macro my-list [& xs] `[,(unpack xs)])
(print (table.concat (my-list 1 2 3) ","))

;;;; splice-body
(macro my-when [c & body] `(if ,c (do ,(unpack body))))
(my-when true (print :a) (print :b))
(my-when false (print :c))

;;;; produce-let
(macro let1 [name val & body] `(let [,name ,val] ,(unpack body)))
(let1 x 5 (print (* x x)))

;;;; produce-fn
(macro defn [name args & body] `(fn ,name ,args ,(unpack body)))
(defn hyp [a b] (math.sqrt (+ (* a a) (* b b))))
(print (hyp 3 4))

;;;; produce-each
(macro each-print [t] `(each [_# v# (ipairs ,t)] (print v#)))
(each-print [:x :y :z])

;;;; produce-for
(macro times [n & body] `(for [i# 1 ,n] ,(unpack body)))
(var count 0)
(times 4 (set count (+ count 1)))
(print count)

;;;; recursive
(macro my-and [& xs]
  (if (= 0 (length xs)) true
      (= 1 (length xs)) (. xs 1)
      `(if ,(. xs 1) (my-and ,(unpack xs 2)) false)))
(print (my-and 1 2 3) (my-and 1 false 3) (my-and))

;;;; recursive-cond
(macro cond [& clauses]
  (if (= 0 (length clauses)) nil
      `(if ,(. clauses 1) ,(. clauses 2) (cond ,(unpack clauses 3)))))
(fn classify [n] (cond (< n 0) :neg (= n 0) :zero true :pos))
(print (classify -3) (classify 0) (classify 9))

;;;; scope-do
(do
  (macro inner [] 42)
  (print (inner)))
(macro inner [] 7)
(print (inner))

;;;; scope-fn
(fn g []
  (macro local-m [x] `(* ,x 3))
  (local-m 5))
(print (g))

;;;; shadow-inner
(macro m [] :outer)
(print (m))
(do
  (macro m [] :inner)
  (print (m)))
(print (m))

;;;; shadow-builtin-when
(macro when [c x] `(if ,c ,x :custom))
(print (when false 1))

;;;; macro-uses-function
(macro build [n]
  (fn rep [s k] (if (= k 0) "" (.. s (rep s (- k 1)))))
  (rep "ab" n))
(print (build 3))

;;;; compile-time-string
(macro upper [s] (string.upper s))
(print (upper "hello"))

;;;; compile-time-table
(macro sum-all [& xs]
  (var total 0)
  (each [_ x (ipairs xs)] (set total (+ total x)))
  total)
(print (sum-all 1 2 3 4))

;;;; sym-predicates
(macro kind [x]
  (if (sym? x) :sym
      (list? x) :list
      (sequence? x) :seq
      (table? x) :table
      (varg? x) :varg
      (type x)))
(fn v [...] (kind ...))
(print (kind a) (kind (a b)) (kind [1]) (kind {:a 1}) (kind "s") (kind 5) (kind true) (v))

;;;; sym-name
(macro name-of [x] (tostring x))
(print (name-of hello-world) (name-of a.b.c))

;;;; sym-build
(macro call-named [fname & args] (list (sym fname) (unpack args)))
(print (call-named :string.upper "abc"))

;;;; list-build
(macro plus [a b] (list (sym "+") a b))
(print (plus 2 3))

;;;; sequence-build
(macro pair [a b] (sequence a b))
(let [[x y] (pair 1 2)] (print x y))

;;;; multi-sym
(macro parts [s] (let [p (multi-sym? s)] (if p (length p) 0)))
(print (parts a.b.c) (parts abc) (parts a:b))

;;;; in-scope
(macro bound? [s] (if (in-scope? s) :yes :no))
(local here 1)
(print (bound? here) (bound? nowhere))
(fn h [arg] (bound? arg))
(print (h 1))

;;;; macroexpand
(macro inc1 [x] `(+ ,x 1))
(macro show [form] (tostring (. (macroexpand form) 1)))
(print (show (inc1 2)))

;;;; macroexpand-length
(macro inc2 [x] `(+ ,x 2))
(macro count-expanded [form] (length (macroexpand form)))
(print (count-expanded (inc2 5)))

;;;; view-helper
(macro shown [x] (view x))
(print (shown [1 2 {:a "b"}]))
(print (shown (f x 1)))

;;;; quote-runtime-data
(let [s '[1 2 3] t '{:a 9}]
  (print (. s 2) (. t :a) ':kw '5 '"str" 'true))

;;;; quote-runtime-unquote
(local n 7)
(let [s `[1 ,n]] (print (. s 2)))

;;;; assert-compile-ok
(macro checked [x] (assert-compile (= (type x) :number) "want a number" x) x)
(print (checked 5))

;;;; varargs-in-macro
(macro count-args [...] (select :# ...))
(print (count-args a b c) (count-args))

;;;; lambda-macro
(macros {:m (lambda [a ?b] (if ?b `(+ ,a ,?b) a))})
(print (m 1) (m 1 2))

;;;; string-key-table
(macro keyed [k v] {k v})
(print (. (keyed :a 1) :a))

;;;; nested-quote-table
(macro mk [x] `{:val ,x :twice ,(* 2 x)})
(let [t (mk 4)] (print t.val t.twice))

;;;; macro-returns-nil
(macro nothing [] nil)
(print (nothing))

;;;; macro-defines-local
(macro deflocal [name val] `(local ,name ,val))
(deflocal answer 42)
(print answer)

;;;; method-call-in-macro
(macro upcase [s] `(: ,s :upper))
(print (upcase "abc"))

;;;; hashfn-in-expansion
(macro mapped [t] `(icollect [_# v# (ipairs ,t)] (#(* $ 10) v#)))
(print (table.concat (mapped [1 2 3]) " "))

;;;; macro-in-threading
(macro double [x] `(* 2 ,x))
(print (-> 3 (double) (+ 1)))

;;;; macro-with-case
(macro kind-of [x] `(case ,x (where n# (= (type n#) :number)) :num _# :other))
(print (kind-of 5) (kind-of :s))

;;;; macro-pcall
(macro safe [x] (let [(ok v) (pcall #(error "inner"))] (if ok x `(.. ,x "!"))))
(print (safe "caught"))

;;;; macro-math
(macro pi2 [] (* 2 math.pi))
(print (> (pi2) 6))

;;;; raises !error
(macro boom [] (error "boom"))
(boom)

;;;; assert-compile-fails !error
(macro checked [x] (assert-compile (= (type x) :number) "want a number" x) x)
(print (checked :s))

;;;; wrong-arity !error
(macros {:two (lambda [a b] `(+ ,a ,b))})
(print (two 1))

;;;; unhygienic-bind !error
(macro bad [x] `(let [y ,x] y))
(print (bad 1))

;;;; out-of-scope !error
(do (macro inner [] 1))
(print (inner))

;;;; macro-reference !error
(macro m [] 1)
(print m)

;;;; overshadow-local !error
(macro m [] 1)
(local m 2)

;;;; quote-symbol-runtime !error
(print 'x)

;;;; unquote-outside !error
(print ,x)

;;;; macro-no-io !error
(macro m [] (io.open "x"))
(m)

;;;; macro-special-name !error
(macro if [] 1)
