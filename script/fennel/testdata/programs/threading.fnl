;;;; thread-first
(print (-> 5 (+ 1) (* 2) (- 3)))
;;;; thread-first-sym
(print (-> "hello" string.upper))
;;;; thread-last
(print (->> [1 2 3] (icollect [_ v (ipairs [4 5])]) length))
;;;; thread-last-args
(print (->> 10 (- 100) (/ 1000)))
;;;; thread-first-method
(print (-> "a,b" (string.gsub "," ";")))
;;;; thread-nil-safe
(print (-?> {:a {:b 5}} (. :a) (. :b)))
(print (-?> {:a {}} (. :a) (. :b) (+ 1)))
(print (-?> nil (. :a)))
;;;; thread-nil-safe-last
(print (-?>> [1 2] (. [10 20 30]) (+ 1)))
(print (-?>> 5 (. {})))
;;;; thread-nil-safe-call-once
(var n 0)
(fn f [] (set n (+ n 1)) {:v 1})
(print (-?> (f) (. :v)) n)
;;;; thread-empty
(print (-> 1))
;;;; doto-basic
(local t (doto [] (table.insert 1) (table.insert 2)))
(print (table.concat t ","))
;;;; doto-method
(local o {:log []})
(fn o.add [self x] (table.insert self.log x))
(doto o (: :add :a) (: :add :b))
(print (table.concat o.log))
;;;; doto-value
(print (length (doto [1] (table.insert 2))))
;;;; safe-dot
(local t {:a {:b {:c 1}}})
(print (?. t :a :b :c) (?. t :x :y) (?. nil :a) (type (?. t :a :b)))
;;;; safe-dot-false-error !error
(print (?. {:a false} :a) (?. {:a false} :a :b))
;;;; dot-basic
(local t {:a {:b [10 20]}})
(print (. t :a :b 2) (. t :a :missing) t.a.b.1)
;;;; dot-computed
(local t {:k1 :v1})
(local key :k1)
(print (. t key) (. [5 6 7] (+ 1 1)))
;;;; dot-single
(print (. 42))
;;;; dot-string-key-non-ident
(local t {"a b" 1 "x-y" 2 "end" 3})
(print (. t "a b") t.x-y t.end)
;;;; multisym-numeric
(local t {:1 :one})
(print t.1)
;;;; method-colon-sym
(local obj {:name "o" :greet (fn [self g] (.. g " " self.name))})
(print (obj:greet "hello"))
;;;; method-nested-obj
(local m {:obj {:val 3 :get (fn [self] self.val)}})
(print (m.obj:get))
;;;; method-call-side-effect-once
(var n 0)
(fn mk [] (set n (+ n 1)) {:m (fn [self] :called)})
(print (: (mk) :m) n)
