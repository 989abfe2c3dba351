# Chromium from Debian for the dashboard's browser tests (Playwright drives
# /usr/bin/chromium; its own browser download is not reachable). Included from the
# Makefile; the tests that need it skip, with the reason, when it is missing.
#
# Wiring (in the Makefile):
#   test: chromium
#   screenshots: chromium

.PHONY: chromium

chromium:  ## install Chromium (Debian package chromium) when /usr/bin/chromium is missing
	@if [ -x /usr/bin/chromium ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; \
	else echo "chromium is missing and this user cannot install packages: apt-get install chromium" >&2; exit 1; fi; \
	{ $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; } \
	|| { echo "could not install chromium (as root: apt-get install chromium)" >&2; exit 1; }; \
	[ -x /usr/bin/chromium ] || { echo "chromium installed but no /usr/bin/chromium" >&2; exit 1; }
