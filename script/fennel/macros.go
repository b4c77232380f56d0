package fennel

// The forms below are macros in the reference compiler; here they are
// rewritten into core forms before compiling, the way those macros expand.

func spThread(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	name := n.items[0].s
	c.assert(len(n.items) >= 2, n, "missing subject")
	return c.compile(c.thread(name, n, n.items[1], n.items[2:], sc), sc, b, o), true
}

// idempotent says whether evaluating x twice is harmless and cheap.
func idempotent(x *node) bool {
	switch x.kind {
	case kNum, kStr, kBool:
		return true
	case kSym:
		return x.s != "..." && !containsAny(x.s, ".:")
	}
	return false
}

func containsAny(s, chars string) bool {
	for i := 0; i < len(s); i++ {
		for j := 0; j < len(chars); j++ {
			if s[i] == chars[j] {
				return true
			}
		}
	}
	return false
}

func (c *compiler) thread(name string, at, val *node, steps []*node, sc *scope) *node {
	for i, step := range steps {
		var call []*node
		if step.kind == kList {
			call = append(call, step.items...)
		} else {
			call = []*node{step}
		}
		c.assert(len(call) > 0, step, "expected a function to call")
		nilSafe := name == "-?>" || name == "-?>>"
		if nilSafe && !idempotent(val) {
			tmp := c.symNode("tmp", at)
			rest := list(at, append([]*node{sym(at, name), tmp}, steps[i:]...)...)
			return list(at, sym(at, "let"), seq(at, tmp, val), rest)
		}
		var next []*node
		if name == "->" || name == "-?>" {
			next = append([]*node{call[0], val}, call[1:]...)
		} else {
			next = append(append([]*node{}, call...), val)
		}
		stepNode := &node{kind: kList, line: step.line, col: step.col, items: next}
		if nilSafe {
			rest := c.thread(name, at, stepNode, steps[i+1:], sc)
			return list(at, sym(at, "if"), list(at, sym(at, "not="), sym(at, "nil"), val), rest)
		}
		val = stepNode
	}
	return val
}

func spDoto(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.assert(len(n.items) >= 2, n, "missing subject")
	tmp := c.symNode("tmp", n)
	out := []*node{sym(n, "let"), seq(n, tmp, n.items[1])}
	for _, step := range n.items[2:] {
		var call []*node
		if step.kind == kList {
			call = step.items
		} else {
			call = []*node{step}
		}
		c.assert(len(call) > 0, step, "expected a function to call")
		items := append([]*node{call[0], tmp}, call[1:]...)
		out = append(out, &node{kind: kList, line: step.line, col: step.col, items: items})
	}
	out = append(out, tmp)
	return c.compile(list(n, out...), sc, b, o), true
}

func spPartial(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.assert(len(n.items) >= 2, n, "expected a function to partially apply")
	var bindings []*node
	call := []*node{n.items[1]}
	for _, a := range n.items[2:] {
		if idempotent(a) {
			call = append(call, a)
			continue
		}
		g := c.symNode("partial", a)
		bindings = append(bindings, g, a)
		call = append(call, g)
	}
	varg := &node{kind: kVarg, line: n.line, col: n.col}
	call = append(call, varg)
	fn := list(n, sym(n, "fn"), seq(n, varg), list(n, call...))
	if len(bindings) > 0 {
		fn = list(n, sym(n, "let"), seq(n, bindings...), fn)
	}
	return c.compile(fn, sc, b, o), true
}

// extractInto removes &into x from an iterator binding table.
func (c *compiler) extractInto(iter *node) (into *node, rest *node, found bool) {
	items := []*node{}
	for i := 0; i < len(iter.items); i++ {
		if iter.items[i].isSym("&into") {
			c.assert(i+1 < len(iter.items), iter.items[i], "expected table after &into")
			into = iter.items[i+1]
			found = true
			i++
			continue
		}
		items = append(items, iter.items[i])
	}
	if into == nil {
		into = seq(iter)
	}
	return into, &node{kind: kSeq, line: iter.line, col: iter.col, items: items}, found
}

func spCollect(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.assert(len(n.items) >= 2 && n.items[1].kind == kSeq && len(n.items[1].items) >= 2, n, "expected iterator binding table")
	c.assert(len(n.items) >= 3, n, "expected key and value expression")
	c.assert(len(n.items) <= 4, n, "expected 1 or 2 body expressions; wrap multiple expressions with do")
	kv := n.items[2]
	if len(n.items) == 4 {
		kv = list(n, sym(n, "values"), n.items[2], n.items[3])
	}
	into, iter, _ := c.extractInto(n.items[1])
	tbl, k, v := c.symNode("tbl", n), c.symNode("k", n), c.symNode("v", n)
	form := list(n, sym(n, "let"), seq(n, tbl, into),
		list(n, sym(n, "each"), iter,
			list(n, sym(n, "let"), seq(n, list(n, k, v), kv),
				list(n, sym(n, "if"), list(n, sym(n, "and"),
					list(n, sym(n, "not="), k, sym(n, "nil")), list(n, sym(n, "not="), v, sym(n, "nil"))),
					list(n, sym(n, "tset"), tbl, k, v)))),
		tbl)
	return c.compile(form, sc, b, o), true
}

func spSeqCollect(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	how := "each"
	minBind := 2
	if n.items[0].s == "fcollect" {
		how, minBind = "for", 3
	}
	c.assert(len(n.items) >= 2 && n.items[1].kind == kSeq && len(n.items[1].items) >= minBind, n, "expected iterator binding table")
	c.assert(len(n.items) >= 3, n, "expected table value expression")
	c.assert(len(n.items) == 3, n, "expected exactly one body expression. Wrap multiple expressions in do")
	into, iter, hasInto := c.extractInto(n.items[1])
	tbl, i, val := c.symNode("tbl", n), c.symNode("i", n), c.symNode("val", n)
	var form *node
	if hasInto {
		form = list(n, sym(n, "let"), seq(n, tbl, into),
			list(n, sym(n, how), iter,
				list(n, sym(n, "let"), seq(n, val, n.items[2]),
					list(n, rawSym(n, "table.insert"), tbl, val))),
			tbl)
	} else {
		form = list(n, sym(n, "let"), seq(n, tbl, into),
			list(n, sym(n, "var"), i, list(n, sym(n, "length"), tbl)),
			list(n, sym(n, how), iter,
				list(n, sym(n, "let"), seq(n, val, n.items[2]),
					list(n, sym(n, "when"), list(n, sym(n, "not="), sym(n, "nil"), val),
						list(n, sym(n, "set"), i, list(n, sym(n, "+"), i, num(n, 1))),
						list(n, sym(n, "tset"), tbl, i, val)))),
			tbl)
	}
	return c.compile(form, sc, b, o), true
}

func spAccumulate(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	how := "each"
	if n.items[0].s == "faccumulate" {
		how = "for"
	}
	c.assert(len(n.items) >= 2 && n.items[1].kind == kSeq && len(n.items[1].items) >= 4, n,
		"expected initial value and iterator binding table")
	c.assert(len(n.items) >= 3, n, "expected body expression")
	c.assert(len(n.items) == 3, n, "expected exactly one body expression. Wrap multiple expressions with do")
	binds := n.items[1].items
	acc, init := binds[0], binds[1]
	iter := seq(n.items[1], binds[2:]...)
	result := acc
	if acc.kind == kList {
		result = list(n, append([]*node{sym(n, "values")}, acc.items...)...)
	}
	form := list(n, sym(n, "do"),
		list(n, sym(n, "var"), acc, init),
		list(n, sym(n, how), iter, list(n, sym(n, "set"), acc, n.items[2])),
		result)
	return c.compile(form, sc, b, o), true
}

func spWithOpen(c *compiler, n *node, sc *scope, b *block, o copts) ([]expr, bool) {
	c.assert(len(n.items) >= 2 && n.items[1].kind == kSeq && len(n.items[1].items)%2 == 0, n, "expected binding table")
	binds := n.items[1].items
	var closers []*node
	for i := len(binds) - 2; i >= 0; i -= 2 {
		c.assert(binds[i].kind == kSym, binds[i], "with-open only allows symbols in bindings")
		closers = append(closers, list(n, sym(n, ":"), binds[i], str(n, "close")))
	}
	// (let [binds] (fn close-handlers [ok ...] (closers) (if ok ... (error ... 0)))
	//   (close-handlers (xpcall (fn [] body) debug.traceback)))
	ok := c.symNode("ok", n)
	varg := &node{kind: kVarg, line: n.line, col: n.col}
	handler := list(n, append(append([]*node{sym(n, "fn"), seq(n, ok, varg)}, closers...),
		list(n, sym(n, "if"), ok, varg, list(n, rawSym(n, "error"), varg, num(n, 0))))...)
	h := c.symNode("close", n)
	body := list(n, append([]*node{sym(n, "fn"), seq(n)}, n.items[2:]...)...)
	form := list(n, sym(n, "let"), seq(n, append(append([]*node{}, binds...), h, handler)...),
		list(n, h, list(n, rawSym(n, "pcall"), body)))
	return c.compile(form, sc, b, o), true
}
