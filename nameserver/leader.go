package nameserver

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/golang/glog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/nameserver/namespace"
	"github.com/bfs-go/bfs/nameserver/repair"
	"github.com/bfs-go/bfs/nameserver/replica"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// LeaderTrailer is the trailer a NOT_LEADER answer names the leader's
// client address in (absent if this member knows of no leader).
const LeaderTrailer = "bfs-leader"

// anyMember lists the methods of the NameServer service every member
// answers; all its others are the leader's.
var anyMember = map[string]bool{
	"/bfs.NameServer/ClusterStatus": true,
}

// nameServerPrefix starts the full names of the NameServer service's
// methods. The other services (gRPC health, reflection) are the daemon's,
// answered by every member: a follower is a healthy process.
const nameServerPrefix = "/bfs.NameServer/"

// leaderOnlyMethod reports whether a method is answered by the leader
// only.
func leaderOnlyMethod(method string) bool {
	return strings.HasPrefix(method, nameServerPrefix) && !anyMember[method]
}

// notLeaderAnswers holds, for every unary method of the NameServer
// service, how to make its response: a follower's answer to each is the
// response with status NOT_LEADER.
var notLeaderAnswers = func() map[string]protoreflect.MessageType {
	out := map[string]protoreflect.MessageType{}
	sd := bfspb.File_nameserver_proto.Services().ByName("NameServer")
	for i := 0; i < sd.Methods().Len(); i++ {
		m := sd.Methods().Get(i)
		mt, err := protoregistry.GlobalTypes.FindMessageByName(m.Output().FullName())
		if err != nil || m.IsStreamingServer() {
			continue
		}
		out[fmt.Sprintf("/%s/%s", sd.FullName(), m.Name())] = mt
	}
	return out
}()

// leaderOnly is the unary interceptor that keeps the leader's methods to
// the leader: on a member that does not lead (or whose term has not
// started), a request is answered NOT_LEADER, naming the leader's client
// address in the LeaderTrailer; on the leader, the handler runs in the
// term that was in office when the request arrived (termOf).
func (s *Server) leaderOnly(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !leaderOnlyMethod(info.FullMethod) {
		return handler(ctx, req)
	}
	t := s.current()
	if t == nil {
		mt, ok := notLeaderAnswers[info.FullMethod]
		if !ok {
			return nil, status.Error(codes.Unavailable, s.notLeaderMessage(ctx))
		}
		return notLeaderAnswer(mt.New(), s.notLeaderMessage(ctx)).Interface(), nil
	}
	resp, err := handler(context.WithValue(ctx, termKey{}, t), req)
	if r, ok := resp.(interface{ GetStatus() bfspb.StatusCode }); ok && r.GetStatus() == bfspb.StatusCode_NOT_LEADER {
		s.notLeaderMessage(ctx) // the term ended meanwhile: name the new leader if known
	}
	return resp, err
}

// leaderOnlyStream is leaderOnly for the streams (WatchDirLocks): a
// member that does not lead ends the stream with UNAVAILABLE, naming
// the leader in the trailer.
func (s *Server) leaderOnlyStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if !leaderOnlyMethod(info.FullMethod) {
		return handler(srv, ss)
	}
	t := s.current()
	if t == nil {
		return status.Error(codes.Unavailable, s.notLeaderMessage(ss.Context()))
	}
	return handler(srv, &termStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), termKey{}, t)})
}

type termStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *termStream) Context() context.Context { return s.ctx }

// notLeaderMessage sets the LeaderTrailer to the leader's client address
// and says who leads, for a NOT_LEADER answer.
func (s *Server) notLeaderMessage(ctx context.Context) string {
	name, _ := s.node.Leader()
	if name == "" || name == s.node.Name() {
		return fmt.Sprintf("%s is not the leader and knows of none (an election, or the group has no majority: bfs cluster status)", s.node.Name())
	}
	m, ok := s.ns.Member(name)
	if !ok || m.ClientAddress == "" {
		return fmt.Sprintf("%s is not the leader; the leader is %s, whose client address is not known yet", s.node.Name(), name)
	}
	if err := grpc.SetTrailer(ctx, metadata.Pairs(LeaderTrailer, m.ClientAddress)); err != nil {
		glog.V(2).Infof("leader trailer: %v", err)
	}
	return fmt.Sprintf("%s is not the leader; the leader is %s at %s", s.node.Name(), name, m.ClientAddress)
}

// replicaConfig is the configuration of this member's replica, with lis
// its Raft listener and advertise the address its peers dial.
func (s *Server) replicaConfig(lis net.Listener, advertise string) replica.Config {
	return replica.Config{
		Dir:                filepath.Join(s.cfg.DataDir, "raft"),
		Name:               s.cfg.Name,
		RaftAddress:        advertise,
		Listener:           lis,
		Dial:               s.cfg.RaftDial,
		Local:              s.cfg.TestingKnobs.RaftLocal,
		TLS:                s.raftTLS(),
		InitialCluster:     s.cfg.InitialCluster,
		Join:               s.cfg.Join,
		HeartbeatTimeout:   s.cfg.Raft.HeartbeatTimeout,
		ElectionTimeout:    s.cfg.Raft.ElectionTimeout,
		LeaderLeaseTimeout: s.cfg.Raft.LeaderLeaseTimeout,
		SnapshotInterval:   s.cfg.Raft.SnapshotInterval,
		SnapshotThreshold:  s.cfg.Raft.SnapshotThreshold,
		TrailingLogs:       s.cfg.Raft.TrailingLogs,
		OnLeadership:       s.terms.leadership,
		OnFatal:            s.fatal,
		OnApply:            s.metrics.applied,
	}
}

// raftTLS is the Raft links' TLS: none for an insecure member.
func (s *Server) raftTLS() replica.TLS {
	if s.cfg.TLS == nil {
		return nil
	}
	return raftTLS{s.cfg.TLS}
}

// checkStart refuses, before anything is opened for writing, a start that
// contradicts what this member stored (see replica.Check): a refused
// start changes nothing.
func (s *Server) checkStart() error {
	formatted, cluster := false, ""
	dir := filepath.Join(s.cfg.DataDir, "namespace")
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		ns, err := namespace.Open(namespace.Options{Dir: dir, Logger: glogLogger{}, ReadOnly: true})
		if err != nil {
			return err
		}
		formatted, cluster = ns.Formatted(), ns.ClusterID()
		if err := ns.Close(); err != nil {
			return err
		}
	}
	advertise := s.cfg.RaftAdvertise
	if advertise == "" {
		advertise = s.cfg.RaftListen
	}
	if s.cfg.TestingKnobs.RaftLocal {
		advertise = "local"
	}
	if advertise == "" || strings.HasSuffix(advertise, ":0") {
		advertise = "127.0.0.1:0" // not known until bound; only a group of one takes such a port
	}
	if err := replica.Check(s.replicaConfig(nil, advertise), formatted, cluster); err != nil {
		return fmt.Errorf("nameserver: %w", err)
	}
	return nil
}

// openReplica joins the group: the Raft log and snapshots live under
// the data directory beside the namespace.
func (s *Server) openReplica() error {
	lis := s.cfg.RaftListener
	advertise := s.cfg.RaftAdvertise
	if s.cfg.TestingKnobs.RaftLocal {
		advertise = "local"
	} else if lis == nil {
		var err error
		if lis, err = net.Listen("tcp", s.cfg.RaftListen); err != nil {
			return fmt.Errorf("nameserver: raft listener: %w", err)
		}
	}
	if advertise == "" {
		advertise = lis.Addr().String()
	}
	node, err := replica.Open(s.replicaConfig(lis, advertise), s.ns)
	if err != nil {
		return fmt.Errorf("nameserver: %w", err)
	}
	s.node = node
	s.raftAddr = advertise
	s.metrics.replicaGauges(node)
	node.Start()
	go s.publishSelf()
	return nil
}

// fatal is the replica's report of a storage failure: the node stopped
// applying, and the server stops serving (Serve returns the failure).
func (s *Server) fatal(err error) {
	select {
	case s.fatalc <- err:
	default:
	}
}

// registerGauges registers the gauges read at scrape time from the term
// in office (zero on a follower).
func (s *Server) registerGauges() {
	s.metrics.lockGauges(s.ns.Locks().Counts, s.cleaningCounts)
	s.metrics.limitGauges(s.watch.streams, s.waits.count)
	s.metrics.corruptGauge(func() int {
		if t := s.current(); t != nil {
			return t.blocks.CorruptCount()
		}
		return 0
	})
	s.metrics.registry.MustRegister(newChunkserverCollector(s))
	s.metrics.registry.MustRegister(safeModeCollectors(func() SafeModeStatus {
		if t := s.current(); t != nil {
			return t.safe.Status()
		}
		return SafeModeStatus{}
	})...)
	s.metrics.repairGauges(func() repair.Stats {
		if t := s.current(); t != nil {
			return t.repair.Stats()
		}
		return repair.Stats{}
	})
}

// liveSessions counts the live sessions, for the gauge.
func (s *Server) liveSessions() float64 {
	if t := s.current(); t != nil {
		return float64(len(t.sessions.List()))
	}
	return 0
}

// clientAddress is the address this member publishes for clients.
func (s *Server) clientAddress() string {
	if a := s.cfg.Advertise; a != "" {
		return a
	}
	if p := s.served.Load(); p != nil {
		return *p
	}
	return ""
}

// publishSoon has publishSelf look at once (serving started, a term
// began).
func (s *Server) publishSoon() {
	select {
	case s.publishc <- struct{}{}:
	default:
	}
}

// publishInterval is how often a member checks that the member table
// has its addresses right.
const publishInterval = time.Second

// publishSelf keeps this member's addresses in the member table: the
// leader proposes its own record; a follower asks the leader to.
func (s *Server) publishSelf() {
	for {
		t := s.cfg.Clock.NewTimer(publishInterval)
		select {
		case <-s.stopc:
			t.Stop()
			return
		case <-t.C():
		case <-s.publishc:
			t.Stop()
		}
		if err := s.publishOnce(); err != nil {
			glog.V(1).Infof("publishing this member's addresses: %v", err)
		}
	}
}

func (s *Server) publishOnce() error {
	me := &bfspb.Member{Name: s.node.Name(), RaftAddress: s.raftAddr, ClientAddress: s.clientAddress()}
	if me.ClientAddress == "" {
		return nil // not serving yet
	}
	if !s.ns.Formatted() {
		return nil // the first leader formats first
	}
	if cur, ok := s.ns.Member(me.Name); ok && proto.Equal(cur, me) {
		return nil
	}
	if s.current() != nil {
		_, err := s.propose(&bfspb.Command{Op: &bfspb.Command_Member{Member: &bfspb.MemberCmd{Member: me}}})
		return err
	}
	name, _ := s.node.Leader()
	leader, ok := s.ns.Member(name)
	if name == "" || !ok || leader.ClientAddress == "" {
		return fmt.Errorf("no leader with a known client address yet")
	}
	cl, err := s.nameserver(leader.ClientAddress)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	resp, err := cl.PublishMember(ctx, &bfspb.PublishMemberRequest{Member: me})
	if err == nil && resp.Status != bfspb.StatusCode_OK {
		err = fmt.Errorf("%v: %s", resp.Status, resp.Message)
	}
	return err
}

// nameserver returns a client of the member at addr.
func (s *Server) nameserver(addr string) (bfspb.NameServerClient, error) {
	conn, err := s.peers.Conn(addr)
	if err != nil {
		return nil, err
	}
	return bfspb.NewNameServerClient(conn), nil
}

// PublishMember records a member's addresses (the member asks for its
// own record).
func (srv *Server) PublishMember(ctx context.Context, req *bfspb.PublishMemberRequest) (*bfspb.PublishMemberResponse, error) {
	s, notLeader := leading[*bfspb.PublishMemberResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	m := req.GetMember()
	if !srv.isMember(m.GetName(), m.GetRaftAddress()) {
		return &bfspb.PublishMemberResponse{Status: bfspb.StatusCode_NOT_FOUND,
			Message: fmt.Sprintf("%q at %s is not a member of the group", m.GetName(), m.GetRaftAddress())}, nil
	}
	_, err := s.propose(&bfspb.Command{Op: &bfspb.Command_Member{Member: &bfspb.MemberCmd{Member: m}}})
	code, msg := statusOf(err)
	return &bfspb.PublishMemberResponse{Status: code, Message: msg}, nil
}

// isMember reports whether Raft's configuration has name at raftAddr.
func (s *Server) isMember(name, raftAddr string) bool {
	for _, m := range s.node.Members() {
		if m.Name == name && m.Address == raftAddr {
			return true
		}
	}
	return false
}

// ClusterStatus reports this member's view of the group.
func (s *Server) ClusterStatus(context.Context, *bfspb.ClusterStatusRequest) (*bfspb.ClusterStatusResponse, error) {
	st := s.node.Status()
	resp := &bfspb.ClusterStatusResponse{
		Name: s.node.Name(), Role: st.Role, Term: st.Term, CommitIndex: st.Commit, AppliedIndex: st.Applied,
		Leader: st.LeaderName, ClusterId: s.ns.ClusterID(), LastContactMs: -1,
	}
	if st.Role == "leader" {
		resp.LastContactMs = 0
	} else if c := s.node.LastContact(); !c.IsZero() {
		resp.LastContactMs = time.Since(c).Milliseconds()
	}
	for _, m := range s.node.Members() {
		gm := &bfspb.GroupMember{Name: m.Name, RaftAddress: m.Address, Voter: m.Voter}
		if rec, ok := s.ns.Member(m.Name); ok {
			gm.ClientAddress = rec.ClientAddress
		}
		resp.Members = append(resp.Members, gm)
	}
	return resp, nil
}

// catchUpTimeout bounds how long AddMember waits for a new member to
// catch up before it is made a voter.
const catchUpTimeout = 2 * time.Minute

// AddMember adds a nameserver as a nonvoter, waits until it has applied
// what the leader had committed when it was added, then makes it a
// voter: a member that cannot keep up never counts toward a majority.
func (srv *Server) AddMember(ctx context.Context, req *bfspb.AddMemberRequest) (*bfspb.AddMemberResponse, error) {
	s, notLeader := leading[*bfspb.AddMemberResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	if req.Name == "" || req.RaftAddress == "" {
		return &bfspb.AddMemberResponse{Status: bfspb.StatusCode_INVALID_ARGUMENT, Message: "add member: a name and a raft address are needed"}, nil
	}
	if srv.cfg.RaftAdvertise == "" && srv.cfg.RaftListener == nil && strings.HasSuffix(srv.cfg.RaftListen, ":0") {
		return &bfspb.AddMemberResponse{Status: bfspb.StatusCode_INVALID_ARGUMENT, Message: fmt.Sprintf(
			"add member: %s listens for its peers on a port picked at start (%s), which they could not find after a restart: restart it with a fixed --raft-listen first",
			s.node.Name(), srv.raftAddr)}, nil
	}
	for _, m := range s.node.Members() {
		if m.Name == req.Name && m.Address != req.RaftAddress || m.Name != req.Name && m.Address == req.RaftAddress {
			return &bfspb.AddMemberResponse{Status: bfspb.StatusCode_EXISTS,
				Message: fmt.Sprintf("add member %s=%s: the group has %s=%s", req.Name, req.RaftAddress, m.Name, m.Address)}, nil
		}
	}
	err := s.addMember(ctx, req.Name, req.RaftAddress)
	code, msg := statusOf(err)
	return &bfspb.AddMemberResponse{Status: code, Message: msg}, nil
}

func (s *term) addMember(ctx context.Context, name, addr string) error {
	target := s.node.Status().Commit
	if err := s.node.AddNonvoter(name, addr); err != nil {
		return err
	}
	glog.Infof("member %s (%s) added as a nonvoter; promoted once it has applied index %d", name, addr, target)
	ctx, cancel := context.WithTimeout(ctx, catchUpTimeout)
	defer cancel()
	for {
		if applied, err := s.memberApplied(ctx, name); err == nil && applied >= target {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: member %s did not catch up to index %d: it stays a nonvoter; check that it runs with --join and reaches %s",
				errUnavailable, name, target, s.raftAddr)
		case <-s.stopc:
			return fmt.Errorf("%w: leadership ended while %s was catching up", errUnavailable, name)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err := s.node.AddVoter(name, addr); err != nil {
		return err
	}
	glog.Infof("member %s (%s) is a voter", name, addr)
	return nil
}

// memberApplied asks the member name (at the client address it
// published) how far it has applied.
func (s *term) memberApplied(ctx context.Context, name string) (uint64, error) {
	m, ok := s.ns.Member(name)
	if !ok || m.ClientAddress == "" {
		return 0, fmt.Errorf("member %s has not published its client address", name)
	}
	cl, err := s.nameserver(m.ClientAddress)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	st, err := cl.ClusterStatus(ctx, &bfspb.ClusterStatusRequest{})
	if err != nil {
		return 0, err
	}
	return st.AppliedIndex, nil
}

// RemoveMember takes a member out of the group and out of the member
// table.
func (srv *Server) RemoveMember(ctx context.Context, req *bfspb.RemoveMemberRequest) (*bfspb.RemoveMemberResponse, error) {
	s, notLeader := leading[*bfspb.RemoveMemberResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	found := false
	for _, m := range s.node.Members() {
		found = found || m.Name == req.Name
	}
	if !found {
		return &bfspb.RemoveMemberResponse{Status: bfspb.StatusCode_NOT_FOUND,
			Message: fmt.Sprintf("remove member: the group has no member %q", req.Name)}, nil
	}
	if req.Name == s.node.Name() {
		// Leaving: hand leadership over first, then the new leader removes
		// this member when asked again.
		return &bfspb.RemoveMemberResponse{Status: bfspb.StatusCode_INVALID_ARGUMENT,
			Message: "remove member: this is the leader; transfer leadership first (bfs cluster transfer), then remove it"}, nil
	}
	err := s.node.Remove(req.Name)
	if err == nil {
		_, err = s.propose(&bfspb.Command{Op: &bfspb.Command_Member{Member: &bfspb.MemberCmd{
			Member: &bfspb.Member{Name: req.Name}, Remove: true}}})
	}
	code, msg := statusOf(err)
	return &bfspb.RemoveMemberResponse{Status: code, Message: msg}, nil
}

// TransferLeader ends this leader's term, then hands leadership over:
// nothing of the term (a seal, an expiry) is done after the transfer
// began. If the transfer fails, a new term starts here.
func (srv *Server) TransferLeader(ctx context.Context, req *bfspb.TransferLeaderRequest) (*bfspb.TransferLeaderResponse, error) {
	s, notLeader := leading[*bfspb.TransferLeaderResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	srv.terms.end()
	var err error
	if req.To == "" {
		err = s.node.Transfer()
	} else {
		err = s.node.TransferTo(req.To)
	}
	if err != nil && s.node.IsLeader() {
		glog.Warningf("leadership transfer failed (%v): leading again", err)
		srv.terms.leadership(true, s.node.Status().Term)
	}
	code, msg := statusOf(err)
	if err == nil {
		msg = "leadership handed over"
	}
	return &bfspb.TransferLeaderResponse{Status: code, Message: strings.TrimSpace(msg)}, nil
}

// leading returns the term a request is served in, or, when no term is
// in office (this member does not lead, or its term ended), the request's
// NOT_LEADER answer. The leaderOnly interceptor answers most such
// requests before they reach a handler; this covers the rest (a term
// that ended meanwhile, a handler called in-process).
func leading[R proto.Message](srv *Server, ctx context.Context) (*term, R) {
	var zero R
	if t := srv.termOf(ctx); t != nil {
		return t, zero
	}
	return nil, notLeaderAnswer(zero.ProtoReflect().New(), srv.notLeaderMessage(ctx)).Interface().(R)
}

// notLeaderAnswer fills resp, an empty response of the NameServer
// service (each has a status and a message), as NOT_LEADER.
func notLeaderAnswer(resp protoreflect.Message, msg string) protoreflect.Message {
	return statusAnswer(resp, bfspb.StatusCode_NOT_LEADER, msg)
}

// statusAnswer fills resp, an empty response of the NameServer service,
// with code and msg: the answer to a request refused before its handler.
func statusAnswer(resp protoreflect.Message, code bfspb.StatusCode, msg string) protoreflect.Message {
	fields := resp.Descriptor().Fields()
	resp.Set(fields.ByName("status"), protoreflect.ValueOfEnum(protoreflect.EnumNumber(code)))
	resp.Set(fields.ByName("message"), protoreflect.ValueOfString(msg))
	return resp
}

// raftTLS secures the Raft links with the member's node certificate: the
// accepting side takes only another node's certificate, as the dialing
// side does (certs: a client accepts only a node as its server).
type raftTLS struct{ c *certs.Creds }

func (r raftTLS) ClientConfig(host string) *tls.Config { return r.c.ClientConfig(host) }

func (r raftTLS) ServerConfig() *tls.Config {
	cfg := r.c.ServerConfig()
	inner := cfg.GetConfigForClient
	cfg.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		c, err := inner(h)
		if err != nil {
			return nil, err
		}
		c = c.Clone()
		verify := c.VerifyConnection
		c.VerifyConnection = func(cs tls.ConnectionState) error {
			if verify != nil {
				if err := verify(cs); err != nil {
					return err
				}
			}
			id, err := certs.IdentityOf(cs.PeerCertificates[0])
			if err != nil {
				return err
			}
			if id.Kind != certs.KindNode {
				return fmt.Errorf("raft peer presents the certificate of %s, not of a node", id)
			}
			return nil
		}
		return c, nil
	}
	return cfg
}
