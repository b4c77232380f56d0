;;;; if-basic
(print (if true :a :b) (if false :a :b) (if nil :a))
;;;; if-elseif
(fn classify [n] (if (< n 0) :neg (= n 0) :zero (< n 10) :small :big))
(print (classify -5) (classify 0) (classify 5) (classify 50))
;;;; if-no-else
(print (if false 1))
(local x (if false 1))
(print x)
;;;; if-statement
(if true (print :yes) (print :no))
(if false (print :yes))
;;;; if-nested
(print (if true (if false 1 2) 3))
;;;; if-cond-with-stmts
(fn check [x] (if (let [y (* x 2)] (> y 10)) :big (let [z (+ x 1)] (= z 3)) :two :other))
(print (check 10) (check 2) (check 0))
;;;; if-multivalue
(fn f [x] (if x (values 1 2) (values 3 4 5)))
(print (f true))
(print (f false))
;;;; if-truthiness
(print (if 0 :zero-true) (if "" :empty-true) (if [] :table-true) (if false :f :not))
;;;; when-basic
(when true (print :a) (print :b))
(print (when false :x))
(print (when true :y))
;;;; when-value
(fn f [x] (when (> x 0) (print :positive) x))
(print (f 5) (f -1))
;;;; do-basic
(do (print 1) (print 2))
(print (do 1 2 3))
;;;; do-scope
(local x 1)
(do (local x 2) (print x))
(print x)
;;;; do-values
(print (do (values 1 2)))
;;;; do-empty
(print (do))
;;;; each-ipairs
(each [i v (ipairs [:a :b :c])] (print i v))
;;;; each-pairs-sorted
(local t {:b 2 :a 1 :c 3})
(local ks [])
(each [k (pairs t)] (table.insert ks k))
(table.sort ks)
(print (table.concat ks ","))
;;;; each-until
(each [i v (ipairs [1 2 3 4 5]) &until (> v 3)] (print i v))
;;;; each-destructure
(each [_ {: name : n} (ipairs [{:name :a :n 1} {:name :b :n 2}])] (print name n))
(each [_ [x y] (ipairs [[1 2] [3 4]])] (print x y))
;;;; each-string-gmatch
(each [word (string.gmatch "the quick brown" "%a+")] (print word))
;;;; each-custom-iter
(fn range [n] (var i 0) (fn [] (set i (+ i 1)) (when (<= i n) i)))
(each [x (range 3)] (print x))
;;;; each-returns-nil
(print (each [_ _ (ipairs [])] 1))
;;;; each-nested
(each [_ a (ipairs [1 2])] (each [_ b (ipairs [:x :y])] (print a b)))
;;;; each-parens-binding
(each [(k v) (ipairs [:p :q])] (print k v))
;;;; each-last-is-iterator-error !error
(each [k v next {:only 1}] (print k v))
;;;; for-basic
(for [i 1 3] (print i))
;;;; for-step
(for [i 10 1 -3] (print i))
;;;; for-until
(for [i 1 10 &until (= i 4)] (print i))
;;;; for-float
(for [x 0 1 0.25] (print x))
;;;; for-empty
(for [i 1 0] (print :never))
(print :done)
;;;; for-expr-bounds
(local t [1 2 3 4])
(for [i (length t) 1 -1] (print (. t i)))
;;;; while-basic
(var i 0)
(while (< i 3) (print i) (set i (+ i 1)))
;;;; while-cond-stmts
(var n 0)
(while (let [m (+ n 1)] (< m 4)) (set n (+ n 1)) (print n))
;;;; while-returns-nil
(var go true)
(print (while go (set go false)))
;;;; loops-in-expr
(local r (do (var s 0) (for [i 1 10] (set s (+ s i))) s))
(print r)
;;;; accumulate-sum
(print (accumulate [sum 0 _ n (ipairs [1 2 3 4])] (+ sum n)))
;;;; accumulate-string
(print (accumulate [s "" _ c (ipairs [:a :b :c])] (.. s c)))
;;;; accumulate-until
(print (accumulate [s 0 _ n (ipairs [1 2 3 4 5]) &until (> s 5)] (+ s n)))
;;;; accumulate-multi
(print (accumulate [(mn mx) (values math.huge (- math.huge)) _ n (ipairs [3 1 4 1 5])] (values (math.min mn n) (math.max mx n))))
;;;; accumulate-empty
(print (accumulate [acc :init _ _ (ipairs [])] :changed))
;;;; faccumulate-basic
(print (faccumulate [acc 1 i 1 5] (* acc i)))
;;;; faccumulate-step
(print (faccumulate [acc 0 i 10 1 -2] (+ acc i)))
;;;; collect-basic
(local t (collect [k v (pairs {:a 1 :b 2})] (values k (* v 10))))
(print t.a t.b)
;;;; collect-two-forms
(local t (collect [_ v (ipairs [:x :y])] v true))
(print t.x t.y t.z)
;;;; collect-nil-skip
(local t (collect [_ v (ipairs [1 2 3 4])] (when (= 0 (% v 2)) (values v v))))
(print (. t 2) (. t 4) (. t 1))
;;;; collect-into
(local t (collect [_ v (ipairs [:a]) &into {:keep 1}] v v))
(print t.keep t.a)
;;;; collect-view
(print (fennel.view (collect [i v (ipairs [:a :b :c])] v i)))
;;;; icollect-basic
(print (table.concat (icollect [_ v (ipairs [1 2 3])] (* v v)) ","))
;;;; icollect-filter
(print (table.concat (icollect [_ v (ipairs [1 2 3 4 5 6])] (when (= 0 (% v 2)) v)) ","))
;;;; icollect-into
(local base [:a :b])
(icollect [_ v (ipairs [:c :d]) &into base] v)
(print (table.concat base ","))
;;;; icollect-until
(print (table.concat (icollect [_ v (ipairs [1 2 3 4]) &until (= v 3)] v) ","))
;;;; icollect-pairs-count
(print (length (icollect [k v (pairs {:a 1 :b 2 :c 3})] k)))
;;;; icollect-destructure
(print (table.concat (icollect [_ {: n} (ipairs [{:n 1} {:n 2}])] n) "+"))
;;;; fcollect-basic
(print (table.concat (fcollect [i 1 5] (* i 2)) ","))
;;;; fcollect-step-filter
(print (table.concat (fcollect [i 1 10 2] (when (not= i 5) i)) ","))
;;;; fcollect-into
(print (table.concat (fcollect [i 1 2 &into [:z]] i) ","))
;;;; icollect-nested
(print (fennel.view (icollect [_ row (ipairs [[1 2] [3 4]])] (icollect [_ x (ipairs row)] (* x 10)))))
;;;; if-missing-body-error !error
(if true)
;;;; each-no-binding-error !error
(each [(pairs {})] 1)
;;;; for-bad-range-error !error
(for [i 1] (print i))
;;;; each-not-table-error !error
(each x (print x))
;;;; accumulate-bad-error !error
(accumulate [x 0] x)
;;;; collect-too-many-error !error
(collect [k v (pairs {})] k v v)
;;;; icollect-two-bodies-error !error
(icollect [_ v (ipairs [])] v v)
