package catalog

// Closed reports, when called, whether the bot the cartridge id has now
// is closed.
func (c *Catalog) Closed(id string) func() bool {
	e := c.resolve(id)
	return func() bool {
		e.served.mu.Lock()
		defer e.served.mu.Unlock()
		return e.served.closed
	}
}
