;;;; case-literal
(fn f [x] (case x 1 :one 2 :two "s" :string true :bool _ :other))
(print (f 1) (f 2) (f "s") (f true) (f 99))
;;;; case-nil
(print (case nil nil :is-nil _ :not))
;;;; case-bind
(print (case 42 x (* x 2)))
;;;; case-bind-nil-nomatch
(print (case nil x :bound _ :fallback))
;;;; case-question-bind
(print (. (case nil ?x [:matched ?x]) 1))
;;;; case-seq
(fn f [v] (case v [a b] (+ a b) [a] a _ :no))
(print (f [1 2]) (f [5]) (f []) (f :str))
;;;; case-seq-rest
(print (case [1 2 3 4] [a & rest] (.. a ":" (length rest))))
;;;; case-seq-literal-inside
(fn f [v] (case v [:add a b] (+ a b) [:neg a] (- a) _ :unknown))
(print (f [:add 1 2]) (f [:neg 5]) (f [:mul 1 2]))
;;;; case-table
(fn f [v] (case v {:type :circle : r} (* 3 r r) {:type :square : side} (* side side) _ :unknown))
(print (f {:type :circle :r 2}) (f {:type :square :side 3}) (f {:type :tri}))
;;;; case-table-nested
(print (case {:a {:b [1 2]}} {:a {:b [x y]}} (+ x y)))
;;;; case-unify
(fn f [v] (case v [x x] :same [x y] :diff))
(print (f [1 1]) (f [1 2]))
;;;; case-where
(fn f [x] (case x (where n (> n 10)) :big (where n (< n 0)) :neg n :small))
(print (f 50) (f -1) (f 3))
;;;; case-where-or
(fn f [x] (case x (where (or 1 2 3)) :low (where (or :a :b)) :letter _ :other))
(print (f 2) (f :b) (f 9))
;;;; case-where-or-bind
(fn f [x] (case x (where (or [a 1] [1 a])) a _ :none))
(print (f [5 1]) (f [1 7]) (f [2 2]))
;;;; case-where-or-guard
(fn f [x] (case x (where (or [:n n] [:num n]) (> n 0)) n _ :bad))
(print (f [:n 3]) (f [:num 4]) (f [:n -1]))
;;;; case-where-table
(print (case {:age 20} (where {: age} (>= age 18)) :adult _ :minor))
(print (case {:age 10} (where {: age} (>= age 18)) :adult _ :minor))
;;;; case-multivalue
(fn f [...] (case ... (true v) [:ok v] (nil err) [:err err]))
(print (. (f true 1) 1) (. (f nil "bad") 2))
;;;; case-pcall
(fn safe [f] (case (pcall f) (true v) v (false e) (.. "caught:" (tostring (type e)))))
(print (safe #42) (safe #(error {})))
;;;; case-values-count
(print (case (values 1 2 3) (a b c) (+ a b c)))
;;;; case-no-match
(print (case 5 1 :one))
(print (select "#" (case 5 1 :one)))
;;;; case-expr-subject
(fn get [] [1 2])
(print (case (get) [a b] (* a b)))
;;;; case-subject-seq-literal
(print (case [1 2] [a b] (+ a b)))
(print (case [1 2] [a] a))
;;;; case-as
(print (case [1 2] [a &as all] (.. a (length all))))
(print (case {:x 1} {: x &as t} (.. x (type t))))
;;;; case-underscore-names
(print (case [1 2] [_a b] b))
;;;; case-in-let
(let [r (case 3 3 :three)] (print r))
;;;; case-multibody-value
(print (case :x :x (values 1 2)))
;;;; case-strings
(fn cmd [s] (case s :start "starting" :stop "stopping" other (.. "unknown " other)))
(print (cmd :start) (cmd :stop) (cmd :jump))
;;;; case-shadowing-local
(local x 99)
(print (case 5 x (+ x 1)))
;;;; match-pin-local
(local x 5)
(print (match 5 x :pinned _ :no) (match 6 x :pinned _ :no))
;;;; match-pin-in-seq
(local k :key)
(print (match [:key 1] [k v] v _ :no) (match [:other 1] [k v] v _ :no))
;;;; match-bind
(print (match [1 2] [a b] (+ a b)))
;;;; match-legacy-guard
(print (match 5 (x ? (> x 3)) :big _ :small))
(print (match 1 (x ? (> x 3)) :big _ :small))
;;;; match-where
(print (match 10 (where x (= 0 (% x 2))) :even _ :odd))
;;;; match-nested
(fn eval [e] (match e [:+ a b] (+ (eval a) (eval b)) [:* a b] (* (eval a) (eval b)) n n))
(print (eval [:+ 1 [:* 2 3]]))
;;;; match-nil-pattern
(print (match nil nil :nil))
;;;; case-try-ok
(print (case-try 1 1 2 2 3 x (+ x 10)))
;;;; case-try-fail
(print (case-try 1 1 5 2 :no (catch 5 :caught-five _ :other)))
;;;; case-try-nocatch
(print (case-try [1] [a] (+ a 1) 3 :never))
;;;; match-try
(print (match-try {:a 1} {: a} [a] [x] (* x 100)))
;;;; case-missing-body-error !error
(case 1 1)
;;;; case-no-clauses-error !error
(case 1)
;;;; case-or-outside-where-error !error
(case 1 (or 1 2) :x)
;;;; case-legacy-guard-error !error
(case 1 (x ? true) :x)
;;;; case-nested-multi-error !error
(case [1] [(a b)] a)
