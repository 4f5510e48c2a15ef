package blockmap

// Draining reports whether the chunkserver at addr is being
// decommissioned (see SetDraining); it need not be registered.
func (m *Map) Draining(addr string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.mu.draining[addr]
	return ok
}

// Registered returns the live registration at addr.
func (m *Map) Registered(addr string) (Server, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.mu.byAddr[addr]
	if !ok {
		return Server{}, false
	}
	return *m.mu.servers[id], true
}

// HostName is the machine the chunkserver runs on, as placement sees it:
// the host it registered with, else its address's host part.
func (s Server) HostName() string { return s.hostOf() }
