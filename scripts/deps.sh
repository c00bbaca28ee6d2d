#!/usr/bin/env bash
# deps.sh is `make deps`: it lists the direct dependencies in go.mod that have a newer patch
# release (same major and minor version) on the Go module proxy, and below them those whose
# newest release is a newer minor or major one, which may change their API. It exits 1 when a
# patch release is pending, so a CI step can run it; the minor updates are listed only.
set -euo pipefail
cd "$(dirname "$0")/.."

# A direct dependency is a module go.mod requires without "// indirect"; the main module and
# the tools are left out.
patches=() others=()
while read -r path version versions; do
	[ -n "$version" ] || continue
	# go lists the versions in ascending semver order; a pseudo-version has no release line.
	case $version in *-0.*|*.0.0-*) line= ;; *) line=${version%.*}. ;; esac
	newest_patch=$version newest=$version
	for candidate in $versions; do
		case $candidate in *-*) continue ;; esac # pre-releases
		newest=$candidate
		[ -n "$line" ] && [ "${candidate#"$line"}" != "$candidate" ] && newest_patch=$candidate
	done
	if [ "$newest_patch" != "$version" ]; then
		patches+=("$path $version -> $newest_patch")
	elif [ "$newest" != "$version" ] && [ "$(printf '%s\n%s\n' "$version" "$newest" | sort -V | tail -1)" = "$newest" ]; then
		others+=("$path $version -> $newest")
	fi
done < <(go list -m -versions -e -f '{{if and (not .Main) (not .Indirect)}}{{.Path}} {{.Version}} {{range .Versions}}{{.}} {{end}}{{end}}' all 2>/dev/null)

if [ ${#patches[@]} -gt 0 ]; then
	echo "direct dependencies with a newer patch release:"
	printf '  %s\n' "${patches[@]}"
fi
if [ ${#others[@]} -gt 0 ]; then
	echo "direct dependencies with a newer minor or major release (check their changes first):"
	printf '  %s\n' "${others[@]}"
fi
if [ ${#patches[@]} -gt 0 ]; then
	exit 1
fi
echo "deps: every direct dependency is on its newest patch release"
