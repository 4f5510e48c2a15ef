package nameserver

import (
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/bfs-go/bfs/dirlock"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/nameserver/namespace"
	"github.com/bfs-go/bfs/nameserver/session"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// A session id is what entitles a client to act for the session, so an
// answer shows one whole only to the identity that owns the session and
// to admins; everyone else gets its Short form, enough to tell sessions
// apart in a table. The fields that hold session ids are found from the
// descriptors of the service's answers (a string field named session_id
// or ending in _session, at any depth), so a new one is covered without
// being listed here.

// idFields says, of a message type that holds session ids at some depth,
// where: its fields that are ids, and its message fields (single or
// repeated) whose messages hold some.
type idFields struct {
	ids  []protoreflect.FieldDescriptor
	msgs []protoreflect.FieldDescriptor
}

// sessionIDFields maps every message type an answer of the NameServer
// service holds to where its session ids are; types without any are
// absent.
var sessionIDFields = func() map[protoreflect.FullName]*idFields {
	out := map[protoreflect.FullName]*idFields{}
	seen := map[protoreflect.FullName]bool{}
	sd := bfspb.File_nameserver_proto.Services().ByName("NameServer")
	for i := 0; i < sd.Methods().Len(); i++ {
		planFields(sd.Methods().Get(i).Output(), out, seen)
	}
	return out
}()

// planFields records in out where the session ids of md are, and
// reports whether it has any.
func planFields(md protoreflect.MessageDescriptor, out map[protoreflect.FullName]*idFields, seen map[protoreflect.FullName]bool) bool {
	if seen[md.FullName()] {
		return out[md.FullName()] != nil
	}
	seen[md.FullName()] = true
	p := &idFields{}
	for i := 0; i < md.Fields().Len(); i++ {
		fd := md.Fields().Get(i)
		switch {
		case isSessionIDField(fd):
			p.ids = append(p.ids, fd)
		case fd.Message() != nil && !fd.IsMap() && planFields(fd.Message(), out, seen):
			p.msgs = append(p.msgs, fd)
		}
	}
	if len(p.ids) == 0 && len(p.msgs) == 0 {
		return false
	}
	out[md.FullName()] = p
	return true
}

func isSessionIDField(fd protoreflect.FieldDescriptor) bool {
	name := string(fd.Name())
	return fd.Kind() == protoreflect.StringKind && !fd.IsList() &&
		(name == "session_id" || strings.HasSuffix(name, "_session"))
}

// eachID calls visit with every session id field m holds, with the
// message holding it.
func eachID(m protoreflect.Message, visit func(protoreflect.Message, protoreflect.FieldDescriptor)) {
	p := sessionIDFields[m.Descriptor().FullName()]
	if p == nil {
		return
	}
	for _, fd := range p.ids {
		visit(m, fd)
	}
	for _, fd := range p.msgs {
		if !m.Has(fd) {
			continue
		}
		if !fd.IsList() {
			eachID(m.Get(fd).Message(), visit)
			continue
		}
		l := m.Get(fd).List()
		for i := 0; i < l.Len(); i++ {
			eachID(l.Get(i).Message(), visit)
		}
	}
}

// conceal returns resp, an answer to caller's request naming session
// named, with the session ids caller may not see shortened: a copy, if
// any is, since an answer may share messages with the server's state or
// with other callers' answers (a watch event).
func (s *Server) conceal(caller certs.Identity, named string, resp any) any {
	if caller.Kind == certs.KindAdmin {
		return resp
	}
	return s.concealFor(&viewer{s: s, caller: caller.String(), named: named}, resp)
}

// concealFor is conceal for the caller v views as: a stream keeps one
// viewer for all its messages, so that a session's owner is looked up
// once per stream, not once per message.
func (s *Server) concealFor(v *viewer, resp any) any {
	m, ok := resp.(proto.Message)
	if !ok || sessionIDFields[m.ProtoReflect().Descriptor().FullName()] == nil {
		return resp
	}
	hidden := false
	eachID(m.ProtoReflect(), func(msg protoreflect.Message, fd protoreflect.FieldDescriptor) {
		hidden = hidden || !v.sees(msg.Get(fd).String())
	})
	if !hidden {
		return resp
	}
	c := proto.Clone(m)
	eachID(c.ProtoReflect(), func(msg protoreflect.Message, fd protoreflect.FieldDescriptor) {
		if id := msg.Get(fd).String(); !v.sees(id) {
			msg.Set(fd, protoreflect.ValueOfString(session.ID(id).Short()))
		}
	})
	return c
}

// viewer decides which session ids one caller (no admin) sees whole in
// one answer, or in the messages of one stream: what it decided holds,
// as a session's owner never changes and ids are never reused (a
// session that ended is looked up as such, and is not seen whole).
type viewer struct {
	s      *Server
	caller string
	// named is the session the request named: the caller was let name it
	// (see check), so it knows it already, also after the session ended
	// (the SDK's watch of its own session's locks sees them end).
	named string
	seen  map[string]bool
}

// viewerMemory bounds the decisions a viewer remembers.
const viewerMemory = 1024

func (v *viewer) sees(id string) bool {
	// An operator lock's session is no secret: no client can act as it.
	if id == "" || id == v.named || namespace.IsOperatorSession(dirlock.SessionID(id)) {
		return true
	}
	if ok, known := v.seen[id]; known {
		return ok
	}
	// A session that ended, or that belongs to no one (stored before
	// owners were), is shown whole to admins only.
	rec, err := v.s.ns.Session(id)
	ok := err == nil && rec.Owner == v.caller
	if v.seen == nil || len(v.seen) >= viewerMemory {
		v.seen = map[string]bool{} // a long stream forgets, and looks up again
	}
	v.seen[id] = ok
	return ok
}
