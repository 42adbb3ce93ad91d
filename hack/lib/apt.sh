# Sourced by hack/ scripts: Debian packages installed only when missing, with one `apt-get update`.
#   install_missing_packages <label> <packages...>   (label starts the log line, e.g. "install-deps")
install_missing_packages() {
	local label="$1" missing=() p sudo=""; shift
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	echo "$label: installing Debian packages: ${missing[*]}" >&2
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	$sudo apt-get update -qq
	# Another apt run (a parallel script) holds the lock for a while: wait for it rather than fail.
	DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
