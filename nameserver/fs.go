package nameserver

import (
	"context"
	"fmt"

	"github.com/bfs-go/bfs/nameserver/namespace"
	"github.com/bfs-go/bfs/nameserver/session"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// cleanPath normalizes a path from the wire.
func cleanPath(p string) (string, error) { return namespace.CleanPath(p) }

// mutate proposes cmd on behalf of sessionID (empty: a caller without a
// session) with the fences the request carried.
func (s *term) mutate(sessionID string, fences []*bfspb.Fence, cmd *bfspb.Command) (*namespace.Result, error) {
	if err := s.checkSession(sessionID); err != nil {
		return nil, err
	}
	f, err := cleanFences(fences)
	if err != nil {
		return nil, err
	}
	cmd.Fences = f
	res, err := s.propose(cmd)
	if err == nil && len(res.Freed) > 0 {
		s.dropBlocks(res.Freed)
	}
	return res, err
}

// cleanFences normalizes the paths of fences from the wire.
func cleanFences(fences []*bfspb.Fence) ([]*bfspb.Fence, error) {
	if len(fences) == 0 {
		return nil, nil
	}
	out := make([]*bfspb.Fence, len(fences))
	for i, f := range fences {
		p, err := cleanPath(f.GetPath())
		if err != nil {
			return nil, fmt.Errorf("fence: %w", err)
		}
		if f.Epoch == 0 {
			return nil, namespaceInvalid("fence " + p + " without an epoch")
		}
		out[i] = &bfspb.Fence{Path: p, Epoch: f.Epoch}
	}
	return out, nil
}

// gate is the lock check of a request that is not applied as one command
// (FinishFile, a retried AddBlock): the namespace's gate of a command
// on path, with the fences the request carried. Unlike a command's
// check, it is not atomic with what follows it; what follows is the
// nameserver's own close, which locks drain rather than stop.
func (s *Server) gate(path, sessionID string, fences []*bfspb.Fence) error {
	f, err := cleanFences(fences)
	if err != nil {
		return err
	}
	return s.ns.Gate(namespace.GateTarget, []string{path}, sessionID, f)
}

// checkSession refuses a session id that is not live; "" is a caller
// without a session.
func (s *term) checkSession(sessionID string) error {
	if sessionID != "" && !s.sessions.Valid(session.ID(sessionID)) {
		return errSessionInvalid
	}
	return nil
}

func infoOf(res *namespace.Result) *bfspb.FileInfo {
	if res == nil {
		return nil
	}
	return res.Info
}

// Mkdir creates a directory, and with parents every missing ancestor.
func (srv *Server) Mkdir(ctx context.Context, req *bfspb.MkdirRequest) (*bfspb.MkdirResponse, error) {
	s, notLeader := leading[*bfspb.MkdirResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	res, err := s.mkdir(req)
	code, msg := statusOf(err)
	return &bfspb.MkdirResponse{Status: code, Message: msg, Conflict: conflictOf(err), Info: infoOf(res)}, nil
}

func (s *term) mkdir(req *bfspb.MkdirRequest) (*namespace.Result, error) {
	p, err := cleanPath(req.Path)
	if err != nil {
		return nil, err
	}
	return s.mutate(req.SessionId, req.Fences, &bfspb.Command{Op: &bfspb.Command_Mkdir{Mkdir: &bfspb.MkdirCmd{
		Path: p, Mode: req.Mode, Parents: req.Parents, SessionId: req.SessionId,
	}}})
}

// Create creates a file, optionally open for write by the caller's session.
func (srv *Server) Create(ctx context.Context, req *bfspb.CreateRequest) (*bfspb.CreateResponse, error) {
	s, notLeader := leading[*bfspb.CreateResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	res, err := s.create(req)
	code, msg := statusOf(err)
	return &bfspb.CreateResponse{Status: code, Message: msg, Conflict: conflictOf(err), Info: infoOf(res)}, nil
}

func (s *term) create(req *bfspb.CreateRequest) (*namespace.Result, error) {
	p, err := cleanPath(req.Path)
	if err != nil {
		return nil, err
	}
	// A session that ends meanwhile is checked again when the command
	// applies: after its CloseSession applied, nothing of it does.
	return s.mutate(req.SessionId, req.Fences, &bfspb.Command{Op: &bfspb.Command_Create{Create: &bfspb.CreateCmd{
		Path: p, Mode: req.Mode, Replication: req.Replication, Overwrite: req.Overwrite,
		SessionId: req.SessionId, OpenForWrite: req.OpenForWrite,
	}}})
}

// Stat returns one entry.
func (srv *Server) Stat(ctx context.Context, req *bfspb.StatRequest) (*bfspb.StatResponse, error) {
	s, notLeader := leading[*bfspb.StatResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	info, err := s.ns.Stat(req.Path)
	s.noteLive(info)
	code, msg := statusOf(err)
	return &bfspb.StatResponse{Status: code, Message: msg, Info: info}, nil
}

// List returns one page of a directory.
func (srv *Server) List(ctx context.Context, req *bfspb.ListRequest) (*bfspb.ListResponse, error) {
	s, notLeader := leading[*bfspb.ListResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	entries, more, err := s.ns.List(req.Path, req.StartAfter, int(req.Limit))
	for _, e := range entries {
		s.noteLive(e)
	}
	code, msg := statusOf(err)
	return &bfspb.ListResponse{Status: code, Message: msg, Entries: entries, More: more}, nil
}

// DeleteFile deletes a file.
func (srv *Server) DeleteFile(ctx context.Context, req *bfspb.DeleteFileRequest) (*bfspb.DeleteFileResponse, error) {
	s, notLeader := leading[*bfspb.DeleteFileResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	_, err := s.withPath(req.Path, func(p string) (*namespace.Result, error) {
		return s.mutate(req.SessionId, req.Fences, &bfspb.Command{Op: &bfspb.Command_DeleteFile{DeleteFile: &bfspb.DeleteFileCmd{
			Path: p, SessionId: req.SessionId}}})
	})
	code, msg := statusOf(err)
	return &bfspb.DeleteFileResponse{Status: code, Message: msg, Conflict: conflictOf(err)}, nil
}

// DeleteDir deletes a directory: an empty one, or with recursive its whole
// subtree.
func (srv *Server) DeleteDir(ctx context.Context, req *bfspb.DeleteDirRequest) (*bfspb.DeleteDirResponse, error) {
	s, notLeader := leading[*bfspb.DeleteDirResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	_, err := s.withPath(req.Path, func(p string) (*namespace.Result, error) {
		return s.mutate(req.SessionId, req.Fences, &bfspb.Command{Op: &bfspb.Command_DeleteDir{DeleteDir: &bfspb.DeleteDirCmd{
			Path: p, Recursive: req.Recursive, SessionId: req.SessionId}}})
	})
	code, msg := statusOf(err)
	return &bfspb.DeleteDirResponse{Status: code, Message: msg, Conflict: conflictOf(err)}, nil
}

// Rename moves a file or directory atomically.
func (srv *Server) Rename(ctx context.Context, req *bfspb.RenameRequest) (*bfspb.RenameResponse, error) {
	s, notLeader := leading[*bfspb.RenameResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	err := s.rename(req)
	code, msg := statusOf(err)
	return &bfspb.RenameResponse{Status: code, Message: msg, Conflict: conflictOf(err)}, nil
}

func (s *term) rename(req *bfspb.RenameRequest) error {
	src, err := cleanPath(req.Src)
	if err != nil {
		return err
	}
	dst, err := cleanPath(req.Dst)
	if err != nil {
		return err
	}
	_, err = s.mutate(req.SessionId, req.Fences, &bfspb.Command{Op: &bfspb.Command_Rename{Rename: &bfspb.RenameCmd{
		Src: src, Dst: dst, SessionId: req.SessionId}}})
	return err
}

// Chmod changes the mode bits of an entry.
func (srv *Server) Chmod(ctx context.Context, req *bfspb.ChmodRequest) (*bfspb.ChmodResponse, error) {
	s, notLeader := leading[*bfspb.ChmodResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	_, err := s.withPath(req.Path, func(p string) (*namespace.Result, error) {
		return s.mutate(req.SessionId, req.Fences, &bfspb.Command{Op: &bfspb.Command_Chmod{Chmod: &bfspb.ChmodCmd{
			Path: p, Mode: req.Mode, SessionId: req.SessionId}}})
	})
	code, msg := statusOf(err)
	return &bfspb.ChmodResponse{Status: code, Message: msg, Conflict: conflictOf(err)}, nil
}

// DiskUsage adds up a subtree.
func (srv *Server) DiskUsage(ctx context.Context, req *bfspb.DiskUsageRequest) (*bfspb.DiskUsageResponse, error) {
	s, notLeader := leading[*bfspb.DiskUsageResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	u, err := s.ns.DiskUsage(req.Path)
	code, msg := statusOf(err)
	return &bfspb.DiskUsageResponse{Status: code, Message: msg, Bytes: u.Bytes, Files: u.Files, Dirs: u.Dirs}, nil
}

func (s *Server) withPath(path string, fn func(p string) (*namespace.Result, error)) (*namespace.Result, error) {
	p, err := cleanPath(path)
	if err != nil {
		return nil, err
	}
	return fn(p)
}
