package e2e

import (
	"os"
	"testing"

	"github.com/flowd/flowd/internal/testkit/browsertest"
)

func TestMain(m *testing.M) { os.Exit(browsertest.Main(m)) }
