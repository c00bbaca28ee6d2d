package e2e

import (
	"os"
	"testing"

	"github.com/flowd/flowd/internal/browsertest"
)

func TestMain(m *testing.M) { os.Exit(browsertest.Main(m)) }
