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
;;;; numbers
(print 1 -1 0x10 1e3 1.5e-3 1_000_000 0xff .5 -0.5 3.0)
;;;; numbers-big
(print 4503599627370496 (- 0 4503599627370496) 1e308 2e-308 123456789012)
;;;; numbers-inf
(print .inf -.inf (= .nan .nan))
;;;; strings-escapes
(print "tab\there" "nl\\n" "quote\"q" "bell\a" "\65\066\x43" "\u{48}\u{49}" "back\\slash")
;;;; strings-multiline
(print "line1
line2")
;;;; strings-z
(print "a\z     b")
;;;; keywords
(print :foo :foo-bar :a.b :1 (.. :x :y))
;;;; comments
; a comment
(print 1) ; trailing
;; another
(print 2)
;;;; booleans
(print true false (not true) (not nil) (not 0))
;;;; nil-print
(print nil (type nil))
;;;; symbols-mangled
(local my-var 1)
(local x? 2)
(local y! 3)
(local a->b 4)
(print my-var x? y! a->b)
;;;; keyword-names
(local end 5)
(local then 6)
(print end then)
;;;; unicode
(print "héllo wörld 🤖" (length "é"))
;;;; hash-length
(print (# [1 2 3]) (length "abcd") (length []))
;;;; comparison
(print (< 1 2) (> 1 2) (<= 2 2) (>= 1 2) (= 1 1) (not= 1 2) (~= 1 1))
;;;; comparison-chains
(print (< 1 2 3) (< 1 3 2) (<= 1 1 2) (> 3 2 1) (= 1 1 1) (= 1 1 2) (not= 1 2 3) (not= 1 1 1))
;;;; comparison-chain-call
(var n 0)
(fn f [] (set n (+ n 1)) 5)
(print (< 1 (f) 10) n)
;;;; comparison-single-error !error
(print (< 1) (= :a))
;;;; and-or
(print (and 1 2) (and nil 2) (or nil 2) (or false nil) (and) (or) (and 1) (or 1 2 3) (and 1 2 3))
;;;; and-or-short
(var hit false)
(print (and false (do (set hit true) 1)) hit)
(print (or 1 (do (set hit true) 2)) hit)
(print (and 1 (do (set hit true) 2)) hit)
;;;; or-stmts
(var k 0)
(print (or nil (do (set k (+ k 1)) k) (do (set k 100) k)) k)
;;;; arith-identity
(print (+) (*) (+ 5) (* 5) (- 5) (/ 2))
;;;; arith-many
(print (+ 1 2 3 4) (- 10 1 2 3) (* 1 2 3 4) (/ 100 2 5) (.. 1 2 3))
;;;; arith-pow-assoc
(print (^ 2 3 2))
;;;; arith-float
(print (/ 1 3) (* 1.5 2) (+ 0.1 0.2) (// 7.5 2) (% -7 3) (% 7 -3))
;;;; arith-int-div
(print (// 7 2) (// -7 2) (% 5.5 2))
;;;; bitwise
(print (band 12 10) (bor 12 10) (bxor 12 10) (lshift 1 10) (rshift 1024 3) (bnot 0) (band 7) (bor))
;;;; nested-arith
(print (+ (* 2 3) (- 10 (/ 8 2))))
;;;; concat-numbers
(print (.. 1 2) (.. 1.5 "x"))
;;;; tostring-tonumber
(print (tostring 12) (tonumber "42") (tonumber "0x10") (tonumber "z"))
;;;; math-lib
(print (math.max 1 5 3) (math.min 4 2) (math.floor 3.7) (math.abs -3) math.huge)
;;;; string-lib
(print (string.upper "abc") (string.rep "ab" 3) (string.sub "hello" 2 4) (string.format "%d-%s" 5 "x"))
;;;; string-methods
(local s "Hello World")
(print (s:upper) (s:lower) (s:len) (s:sub 1 5) (s:find "World"))
;;;; method-on-literal
(print (: "abc" :upper) (: "x" :rep 3))
;;;; method-call-expr
(print (: (.. "a" "b") :upper))
;;;; table-lib
(local t [3 1 2])
(table.sort t)
(print (table.concat t ","))
(table.insert t 4)
(print (table.concat t ",") (table.remove t) (length t))
;;;; select-count
(print (select "#" 1 2 3) (select 2 :a :b :c))
;;;; type-of
(print (type 1) (type "s") (type {}) (type print) (type nil) (type true))
;;;; pcall-error
(print (pcall error "boom" 0))
(print (select "#" (pcall (fn [] (error {:code 42})))))
;;;; pcall-error-table
(let [(ok e) (pcall (fn [] (error {:code 42})))] (print ok e.code))
;;;; runtime-error !error
(error "boom")
;;;; runtime-error-nil-call !error
(local x nil)
(x)
;;;; runtime-error-index !error
(local t nil)
(print t.a)
