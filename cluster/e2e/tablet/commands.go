package tablet

import (
	"bufio"
	"context"
	"fmt"
	"strings"
)

// Commands of a Rounds run, one per line of Config.Commands:
//
//	round LABEL        one round of stale operations, without a lock attempt
//	round LABEL lock   the same, and a lock attempt at the end
//	finish             end the run
//
// A round is reported between a KindRoundStart and a KindRoundDone event
// (Path carries LABEL), KindRoundDone with the id of the session the
// client had at its end. The run also ends when Commands does.
func (s *server) runCommands(ctx context.Context) error {
	sc := bufio.NewScanner(s.cfg.Commands)
	for round := 0; sc.Scan(); round++ {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 1 && f[0] == "finish":
			return nil
		case (len(f) == 2 || (len(f) == 3 && f[2] == "lock")) && f[0] == "round":
			s.checkLost()
			s.emit(Event{Kind: KindRoundStart, Path: f[1]})
			s.staleRound(ctx, 100+round, len(f) == 3)
			e := Event{Kind: KindRoundDone, Path: f[1]}
			if sess, err := s.c.Session(ctx); err == nil {
				e.Session = sess.ID()
			}
			s.emit(e)
		default:
			return fmt.Errorf("tablet: bad command %q", sc.Text())
		}
	}
	return sc.Err()
}
