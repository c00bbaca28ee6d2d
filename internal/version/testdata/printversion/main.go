// Command printversion prints version.Get() as JSON, for the test that
// stamps it as make build and the Dockerfile do.
package main

import (
	"encoding/json"
	"os"

	"github.com/flowd/flowd/internal/version"
)

func main() {
	_ = json.NewEncoder(os.Stdout).Encode(version.Get())
}
