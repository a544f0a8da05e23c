// Command broken does not compile: mkimage's test of a failing go build.
package main

func main() {
	undefinedFunction()
}
