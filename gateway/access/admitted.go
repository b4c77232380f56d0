package access

// Admitted reports whether r would be allowed now, without the side
// effects of Authorize: no pairing code is issued and no destination is
// recorded. A channel asks it (through the gateway's inbox) before it
// downloads what a message carries, so that a stranger's files are never
// fetched; Authorize still decides the turn.
func (c *Checker) Admitted(r Request) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Entry != Channel {
		return c.entryLocked(r).Verdict == Allow
	}
	rules, ok := c.Channels[r.Channel]
	if !ok || r.SenderID == "" {
		return false
	}
	if r.Group && !r.Mentioned && rules.GroupPolicy != "open" {
		return false
	}
	if Matches(r.Channel, rules.AllowFrom, r.SenderID) {
		return true
	}
	c.reloadLocked()
	for _, a := range c.state.Approved {
		if a.Channel == r.Channel && a.SenderID == r.SenderID {
			return true
		}
	}
	return false
}
