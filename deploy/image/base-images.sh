#!/bin/sh
# base-images.sh [SUITE]
#
# Makes sure the local Docker engine has the two images the Dockerfile
# starts FROM: debian:SUITE (the build stage) and debian:SUITE-slim (the
# runtime stage); SUITE defaults to bookworm.  An image already present is
# left alone.  A missing one is pulled; where no registry can be reached,
# it is made here from Debian's packages the way Debian's official images
# are made (debuerreotype): debootstrap --variant=minbase, the container
# apt/dpkg settings, cleaned of logs and caches, imported with
# `docker import`; the slim variant additionally drops documentation, man
# and info pages and translations (keeping copyright files) and keeps them
# out of later installs with a dpkg path-exclude file.
#
# The packages come from the Debian mirror this machine's APT uses, and the
# images get this machine's Debian sources and its Acquire settings
# (proxies, Check-Valid-Until), so `apt-get` inside `docker build` reaches
# Debian's packages the way this machine does.
#
# Expensive steps are cached in $LUNA_CACHE (default ~/.cache/luna): the
# downloaded .debs and each root filesystem as a tarball, so the images
# come back in seconds after `docker image rm` or a pruned engine.  Delete
# $LUNA_CACHE/debian-* to make them from today's packages.
#
# Environment: LUNA_CACHE, LUNA_BASE_PULL=0 (never try a registry),
# DEBIAN_MIRROR (default: this machine's).  Needs root for debootstrap;
# installs the debootstrap package if it is missing.
set -eu

suite=${1:-bookworm}
cache=${LUNA_CACHE:-${HOME:-/root}/.cache/luna}
pull=${LUNA_BASE_PULL:-1}

say() { echo "base-images: $*" >&2; }
die() { say "$*"; exit 1; }

have() { docker image inspect "$1" >/dev/null 2>&1; }

# The first Debian archive URI in this machine's APT sources (deb822 or
# one-line format), skipping security and disabled files.
host_mirror() {
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk '/^URIs:/ { for (i = 2; i <= NF; i++) print $i }' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /\]$/) { print $i; break } }' "$f"
  done
}

mirror=${DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
  mirror=$(host_mirror | grep -v -e security -e '^$' | grep -E '/debian/?$' | head -n 1 || true)
  mirror=${mirror:-http://deb.debian.org/debian}
fi

# This machine's Acquire settings that decide whether and how APT reaches
# the mirror: proxies, and date checks (a snapshot mirror's Release files
# can be past their Valid-Until).
acquire_conf() {
  apt-config dump 2>/dev/null |
    grep -E '^Acquire::((http|https|ftp)::Proxy|Check-Valid-Until|Check-Date)' || true
}

proxy=$(apt-config dump 2>/dev/null | sed -n 's/^Acquire::http::Proxy "\(.*\)";$/\1/p' | head -n 1)

# Writes the container APT/dpkg configuration Debian's images carry, plus
# this machine's sources and Acquire settings, into the root filesystem $1.
configure_rootfs() {
  root=$1
  cat >"$root/usr/sbin/policy-rc.d" <<'EOF'
#!/bin/sh
# No services start inside an image build.
exit 101
EOF
  chmod 755 "$root/usr/sbin/policy-rc.d"
  echo force-unsafe-io >"$root/etc/dpkg/dpkg.cfg.d/docker-apt-speedup"
  echo 'Apt::AutoRemove::SuggestsImportant "false";' \
    >"$root/etc/apt/apt.conf.d/docker-autoremove-suggests"
  cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  echo 'Acquire::GzipIndexes "true";' >"$root/etc/apt/apt.conf.d/docker-gzip-indexes"
  echo 'Acquire::Languages "none";' >"$root/etc/apt/apt.conf.d/docker-no-languages"
  conf=$(acquire_conf)
  if [ -n "$conf" ]; then
    { echo "# This machine's APT Acquire settings (deploy/image/base-images.sh)."
      echo "$conf"; } >"$root/etc/apt/apt.conf.d/90luna-host-acquire"
  fi
  rm -f "$root/etc/apt/sources.list"
  cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${mirror%/debian}/debian-security
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
}

# Removes what a build leaves that an image must not carry.
clean_rootfs() {
  root=$1
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin \
    "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/archives/partial/* \
    "$root"/var/cache/ldconfig/aux-cache "$root"/var/log/apt/* "$root"/var/log/*.log \
    "$root"/tmp/* "$root"/var/tmp/* "$root"/root/.bash_history
  : >"$root/etc/machine-id"
  # debootstrap's own notes
  rm -f "$root/debootstrap" 2>/dev/null || true
}

# Drops docs, man/info pages and translations as Debian's slim images do
# and writes the dpkg filter that keeps later installs from bringing them
# back.  Copyright files and locale.alias stay.
slimify() {
  root=$1
  cfg=$root/etc/dpkg/dpkg.cfg.d/docker
  {
    echo '# The "slim" variant: files containers do not need are left out of'
    echo '# every package install (deploy/image/base-images.sh).'
    for p in /usr/share/doc/'*' /usr/share/groff/'*' /usr/share/info/'*' \
             /usr/share/linda/'*' /usr/share/lintian/overrides/'*' \
             /usr/share/locale/'*' /usr/share/man/'*'; do
      echo "path-exclude $p"
    done
    for p in /usr/share/doc/'*'/copyright /usr/share/locale/locale.alias \
             /usr/share/locale/all_languages /usr/share/locale/languages; do
      echo "path-include $p"
    done
  } >"$cfg"
  for d in usr/share/doc usr/share/groff usr/share/info usr/share/linda \
           usr/share/lintian/overrides usr/share/locale usr/share/man; do
    [ -d "$root/$d" ] || continue
    find "$root/$d" -depth -mindepth 1 ! -type d ! -type l \
      ! -path "$root/usr/share/doc/*/copyright" \
      ! -path "$root/usr/share/locale/locale.alias" \
      ! -path "$root/usr/share/locale/all_languages" \
      ! -path "$root/usr/share/locale/languages" -exec rm -f {} +
    # dangling links, then emptied directories, until none is left
    while [ -n "$(find "$root/$d" -depth -mindepth 1 \( -xtype l -o -type d -empty \) \
                    -print -exec rm -rf {} + | head -c 1)" ]; do :; done
  done
}

# Makes $cache/debian-$suite[-slim].tar from Debian's packages.
make_tarballs() {
  command -v debootstrap >/dev/null || {
    say "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      debootstrap >/dev/null
  }
  [ "$(id -u)" = 0 ] || die "debootstrap needs root to make debian:$suite"
  mkdir -p "$cache/debs"
  work=$(mktemp -d "$cache/rootfs.XXXXXX")
  trap 'rm -rf "$work"' EXIT INT TERM
  root=$work/rootfs
  say "debootstrap $suite from $mirror (minbase)"
  http_proxy=${http_proxy:-$proxy} debootstrap --variant=minbase --cache-dir="$cache/debs" \
    --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
    "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    { tail -n 20 "$work/debootstrap.log" >&2; die "debootstrap failed (log above)"; }
  configure_rootfs "$root"
  clean_rootfs "$root"
  tar --numeric-owner --xattrs -C "$root" -cf "$cache/debian-$suite.tar.new" .
  mv "$cache/debian-$suite.tar.new" "$cache/debian-$suite.tar"
  slimify "$root"
  tar --numeric-owner --xattrs -C "$root" -cf "$cache/debian-$suite-slim.tar.new" .
  mv "$cache/debian-$suite-slim.tar.new" "$cache/debian-$suite-slim.tar"
  rm -rf "$work"
  trap - EXIT INT TERM
}

import() {
  tag=$1 tarball=$2
  say "docker import $tarball as $tag"
  docker import --change 'CMD ["bash"]' --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --message "made from Debian packages by deploy/image/base-images.sh" \
    "$tarball" "$tag" >/dev/null
}

docker version >/dev/null 2>&1 || die "no Docker engine reachable (docker version failed)"

for variant in "$suite" "$suite-slim"; do
  tag=debian:$variant
  have "$tag" && continue
  if [ "$pull" != 0 ] && docker pull -q "$tag" >/dev/null 2>&1; then
    say "pulled $tag"
    continue
  fi
  [ -f "$cache/debian-$variant.tar" ] || make_tarballs
  import "$tag" "$cache/debian-$variant.tar"
done
