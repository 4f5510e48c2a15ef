package main

import "testing"

func TestHandles(t *testing.T) {
	var a handles[string]
	var b handles[int]
	h1, h2 := a.add("one"), b.add(2)
	if h1 == 0 || h2 == 0 || h1 == h2 {
		t.Fatalf("handles %d and %d: want distinct and non-zero", h1, h2)
	}
	if v, ok := a.get(h1); !ok || v != "one" {
		t.Errorf("get(%d) = %q, %v", h1, v, ok)
	}
	if _, ok := a.get(h2); ok {
		t.Errorf("a handle of another table was found")
	}
	if v, ok := a.remove(h1); !ok || v != "one" {
		t.Errorf("remove(%d) = %q, %v", h1, v, ok)
	}
	if _, ok := a.remove(h1); ok {
		t.Errorf("a handle was removed twice")
	}
	if _, ok := a.get(h1); ok {
		t.Errorf("a removed handle was found")
	}
	if h3 := a.add("three"); h3 <= h2 {
		t.Errorf("handle %d after %d: handles must never be reused", h3, h2)
	}
}
