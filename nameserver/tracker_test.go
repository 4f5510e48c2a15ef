package nameserver

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCreateTrackerHoldsDeletes: a delete of a block is held back while
// any round of its creates is in flight, and handed back (once per
// chunkserver) when the last round ends; other blocks are not held.
func TestCreateTrackerHoldsDeletes(t *testing.T) {
	var tr createTracker
	require.False(t, tr.hold("a", 1), "no creates: delete at once")
	tr.begin(1)
	tr.begin(1) // a retried AddBlock creates again
	require.True(t, tr.hold("a", 1))
	require.True(t, tr.hold("b", 1))
	require.True(t, tr.hold("a", 1))
	require.False(t, tr.hold("a", 2))
	require.Empty(t, tr.end(1), "a round is still in flight")
	require.True(t, tr.hold("c", 1))
	require.Equal(t, []string{"a", "b", "c"}, tr.end(1))
	require.False(t, tr.hold("a", 1), "creates ended: delete at once")
	require.Empty(t, tr.end(1))
	require.Empty(t, tr.blocks)
}
