//go:build !race

package chunkserver

const raceBuild = false
