//go:build !race

package nameserver

const raceBuild = false
