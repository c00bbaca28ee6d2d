// Package version tells which build of flowd is running: what `make build`
// and the Dockerfile stamp into the binary, and what the Go toolchain
// recorded of the commit it was built from.
package version

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// The stamps, set at link time, e.g. go build -ldflags "-X
// github.com/flowd/flowd/internal/version.stampedVersion=$(git describe
// --tags --always --dirty)". A Docker build has no repository to read, so the
// commit and the time come as stamps too.
var (
	stampedVersion   string
	stampedCommit    string
	stampedBuildTime string
)

// Devel is the version of a build that was not stamped and not built from a
// tagged module, as the go command names it.
const Devel = "(devel)"

// Info is what is known of this build; a string is empty where nothing is.
type Info struct {
	// Version is the stamped version (git describe), else the module's
	// version (go install …@v1.2.3), else Devel.
	Version string
	// Commit is the revision built, and CommitTime its time (RFC 3339).
	Commit     string
	CommitTime string
	// Modified says whether the working tree had changes not committed.
	Modified bool
	// BuildTime is when the binary was built (RFC 3339), when stamped.
	BuildTime string
	// GoVersion and Platform are the toolchain and the system it built for.
	GoVersion string
	Platform  string
}

// Get reads the stamps and the build information.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return read(bi, stampedVersion, stampedCommit, stampedBuildTime)
}

// read makes an Info of bi (nil when the binary has none) and the stamps,
// which win over what bi says.
func read(bi *debug.BuildInfo, version, commit, buildTime string) Info {
	in := Info{Version: version, Commit: commit, BuildTime: buildTime, GoVersion: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		if in.Version == "" && bi.Main.Version != "" {
			in.Version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			in.GoVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if in.Commit == "" {
					in.Commit = s.Value
				}
			case "vcs.time":
				in.CommitTime = s.Value
			case "vcs.modified":
				in.Modified = s.Value == "true"
			}
		}
	}
	if in.Version == "" {
		in.Version = Devel
	}
	// git describe --dirty says so of a stamped version.
	if strings.HasSuffix(in.Version, "-dirty") {
		in.Modified = true
	}
	return in
}
