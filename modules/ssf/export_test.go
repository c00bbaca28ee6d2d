package ssf

// OnDrained makes f run whenever a holder finds nothing pending, before it
// lets the stream go; set it before Run.
func (m *Module) OnDrained(f func()) { m.onDrained = f }
