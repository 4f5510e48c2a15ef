package main

// main is never run: the package is built with -buildmode=c-shared or
// c-archive, and its exported functions are the library. It is here
// because a library built from Go is a main package.
func main() {}
