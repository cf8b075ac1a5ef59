# Sourced by the deploy scripts that install Debian packages for the tests (chromium.sh, node.sh).
#
#   apt_install WHAT PACKAGE...   apt-get install PACKAGE... as root or through sudo; WHAT names
#                                 what they are for in the messages
apt_install() {
    local what=$1
    shift
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if ! command -v sudo >/dev/null 2>&1; then
            echo "$what: apt-get needs root; install Debian's $* package(s)" >&2
            exit 2
        fi
        sudo=(sudo -n)
    fi
    echo "$what: installing Debian's $* package(s)" >&2
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -q >/dev/null
    "${sudo[@]}" apt-get install -y -q --no-install-recommends "$@" >/dev/null
}
