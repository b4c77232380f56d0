;;;; spec-input-adapter
(let [content "Hello"] (print (.. "```" content "```")))
;;;; spec-tool-adapter-confirming
(let [name "random-number" parameters-as-json "{\"from\":15,\"to\":25}"] (print (.. name " | " parameters-as-json)))
;;;; spec-tool-adapter-responding
(let [name "random-number" parameters-as-json "{}" output "21"] (print (.. name " | " parameters-as-json "\n" output)))
;;;; spec-tool-adapter-id
(let [id "call-1" name "n" parameters-as-json "{}" output "o"] (print (.. id " | " name " | " parameters-as-json "\n" output)))
;;;; spec-view-parameters
(let [parameters {:from 15 :to 25}] (print (fennel.view parameters)))
;;;; spec-tool-random
(math.randomseed 42)
(local r (math.random 1 100))
(print (and (>= r 1) (<= r 100)))
;;;; spec-tool-random-params
(let [parameters {:from 15 :to 25}]
  (print (let [{ : from : to } parameters]
    (let [n (math.random from to)] (and (>= n 15) (<= n 25))))))
;;;; spec-tool-date
(print (type (os.date)))
;;;; corpus-weather
(let [parameters {:location "Lisbon" :unit "celsius"}]
  (print (let [{:location location :unit unit} parameters]
    (.. "Here is the weather in " location ", in " unit ": 35.8°C."))))
;;;; corpus-lbpe-feedback
(let [name "simple_calculator" parameters-as-json "{\"expression\":\"2+3\"}" output "5"]
  (print (.. "```\n> EXECUTE_FUNCTION\n" name " " parameters-as-json "\n\n> FUNCTION_OUTPUT\n" output "\n```")))
;;;; corpus-ion-executing
(let [name "sh" parameters-as-json "{\"command\":[\"ls\"]}"] (print (.. name " " parameters-as-json)))
;;;; corpus-ion-responding
(let [name "sh" parameters-as-json "{}" output "a very long output that will be cut somewhere"]
  (print (.. name " " parameters-as-json " " (string.sub output 1 25) "...")))
;;;; corpus-bikeshedding
(let [content "a bot"] (print (.. "The bot expected behavior is: 💡💡💡" content "💡💡💡")))
;;;; corpus-hello-world
(let [content "Go"] (print (.. "Write a 'Hello, world!' in the following language: `" content "`")))
;;;; corpus-harry-potter
(let [content "Who is Dobby?"] (print (.. "Considering the fictional world of Harry Potter: ```\n" content "\n```")))
;;;; corpus-pokemon
(let [content "yellow mouse"] (print (.. "Considering the fictional world of Pokémon, identify the Pokémon: ```\n" content "\n```")))
;;;; adapter-multi-form
(let [content "abc"]
  (local upper (string.upper content))
  (local n (length content))
  (print (.. upper ":" n)))
;;;; adapter-json-ish
(let [parameters {:command ["df" "-h"]}]
  (print (table.concat parameters.command " ")))
;;;; adapter-case-on-params
(let [parameters {:op "add" :a 1 :b 2}]
  (print (case parameters {:op :add : a : b} (+ a b) {:op :sub : a : b} (- a b) _ "unknown")))
;;;; adapter-gsub
(let [content "hello world"] (print (pick-values 1 (content:gsub "o" "0"))))
;;;; adapter-format
(let [name "tool" output "42"] (print (string.format "%s -> %s" name output)))
;;;; adapter-icollect-lines
(let [content "a\nb\nc"] (print (table.concat (icollect [line (content:gmatch "[^\n]+")] (.. "> " line)) "\n")))
;;;; adapter-truncate
(let [output (string.rep "x" 100)] (print (if (> (length output) 10) (.. (output:sub 1 10) "...") output)))
;;;; adapter-default-param
(let [parameters {}] (print (or parameters.unit "celsius")))
;;;; adapter-nested-let-fn
(let [content "3"] (print ((fn [n] (* n n)) (tonumber content))))
;;;; adapter-typo-global !error
(let [parameters {}] (fenne.view parameters))
