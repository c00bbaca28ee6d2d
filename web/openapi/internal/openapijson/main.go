// Command openapijson writes the OpenAPI document as flowd serves it at
// /api/openapi.json, with the default base URL, for the code generators that
// scripts/lint-openapi.sh runs.
package main

import (
	"fmt"
	"os"

	"github.com/flowd/flowd/web/openapi"
)

func main() {
	b, err := openapi.JSON(openapi.DefaultBaseURL)
	if err == nil {
		_, err = os.Stdout.Write(b)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "openapijson:", err)
		os.Exit(1)
	}
}
