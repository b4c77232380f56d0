;;;; view-scalars
(print (fennel.view 1) (fennel.view 1.5) (fennel.view "s") (fennel.view true) (fennel.view nil) (fennel.view 2.0))
;;;; view-seq
(print (fennel.view [1 2 3]) (fennel.view []) (fennel.view [[1] [2 [3]]]))
;;;; view-table-sorted
(print (fennel.view {:b 2 :a 1 :c 3}))
;;;; view-mixed-keys
(print (fennel.view {1 :a :x :y true :t 2.5 :f}))
;;;; view-sparse
(print (fennel.view {1 :a 3 :c}) (fennel.view {1 :a 2 :b 4 :d}))
;;;; view-nested
(print (fennel.view {:user {:name "Ann" :tags [:a :b]} :n 1}))
;;;; view-strings
(print (fennel.view "with \"quotes\" and \\ backslash") (fennel.view "tab\tbell\a") (fennel.view "nl\nline"))
(print (fennel.view "\n"))
;;;; view-keys-colon
(print (fennel.view {:simple 1 "has space" 2 "dash-ok" 3 "" 4 "a.b" 5}))
;;;; view-long-multiline
(print (fennel.view {:alpha "aaaaaaaaaaaaaaaaaaaa" :beta "bbbbbbbbbbbbbbbbbbbbbbb" :gamma "ccccccccccccccccccccccccc" :delta [1 2 3]}))
;;;; view-long-seq
(print (fennel.view (fcollect [i 1 40] i)))
;;;; view-deep-nesting-indent
(print (fennel.view {:level1 {:level2 {:level3 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" :other 1}}}))
;;;; view-one-line
(print (fennel.view {:alpha "aaaaaaaaaaaaaaaaaaaa" :beta "bbbbbbbbbbbbbbbbbbbbbbb" :gamma "ccccccccccccccccccccccccc" :delta [1 2 3]} {:one-line? true}))
;;;; view-line-length
(print (fennel.view [1 2 3 4 5 6] {:line-length 5}))
;;;; view-depth
(print (fennel.view {:a {:b {:c {:d 1}}}} {:depth 2}))
;;;; view-cycle
(local t {:name :loop})
(set t.self t)
(print (fennel.view t))
;;;; view-shared-not-cycle
(local shared [1])
(print (fennel.view {:a shared :b shared}))
;;;; view-cycle-seq
(local s [1 2])
(table.insert s s)
(print (fennel.view s))
;;;; view-numbers
(print (fennel.view [1e20 -0.5 0.1 100 1e100 (/ 1 3) (^ 2 53)]))
(print (fennel.view [(/ 1 0) (/ -1 0)]))
;;;; view-empty-as-seq
(print (fennel.view {} {:empty-as-sequence? true}))
;;;; view-prefer-colon
(print (fennel.view "abc" {:prefer-colon? true}) (fennel.view ["x" "y z"] {:prefer-colon? true}))
;;;; view-escape-newlines
(print (fennel.view "a\nb" {:escape-newlines? true}))
;;;; view-utf8
(print (fennel.view "héllo 🤖") (fennel.view {"ключ" "значение"}))
;;;; view-invalid-utf8
(print (fennel.view "\255\254ok"))
;;;; view-control-chars
(print (fennel.view (string.char 0 1 127 200)))
;;;; view-metamethod
(local p (setmetatable {} {:__fennelview (fn [t view opts indent] "#<point>")}))
(print (fennel.view p))
;;;; view-metamethod-lines
(local q (setmetatable {} {:__fennelview (fn [t view opts indent] ["line1" "line2"])}))
(print (fennel.view q))
;;;; view-bool-keys
(print (fennel.view {true 1 false 0}))
;;;; view-number-keys-float
(print (fennel.view {1.5 :a 2 :b}))
;;;; view-json-like
(print (fennel.view {:from 15 :to 25}))
(print (fennel.view {:command ["df" "-h"]}))
;;;; view-table-of-tables-long
(print (fennel.view [{:id 1 :name "first item in the list"} {:id 2 :name "second item in the list"} {:id 3 :name "third"}]))
;;;; view-version
(print (type fennel.version))
