// Package printable makes text that comes from the file system safe to
// show on a terminal. Names, paths and messages are chosen by whoever
// created them (the namespace takes every character but NUL), and a
// control character in one, such as an escape sequence or a carriage
// return, could rewrite what a terminal shows around it: a listing could
// show a locked directory as unlocked. Every line bfs and lockctl print
// for people passes such text through String; JSON output needs nothing,
// its encoder escapes control characters already.
package printable

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// String returns s with every character that is not printable (by
// unicode.IsPrint: letters, marks, numbers, punctuation, symbols and the
// ASCII space) written as Go writes it in a string literal: \x1b, \r,
// \n, \t, \u202e, and \xff for a byte that is not UTF-8. A backslash is
// doubled, so that an escape in the output always stands for one
// character of s, never for text that spells one. Text with nothing to
// escape comes back unchanged.
func String(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case unicode.IsPrint(r):
			b.WriteString(s[i : i+n])
		default:
			q := strconv.QuoteRune(r) // '\x1b', '\u202e': drop the quotes
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}

// Error is String of err's message.
func Error(err error) string { return String(err.Error()) }

// clean reports whether s has nothing String would change.
func clean(s string) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == '\\' || !unicode.IsPrint(r) || (r == utf8.RuneError && n == 1) {
			return false
		}
		i += n
	}
	return true
}
