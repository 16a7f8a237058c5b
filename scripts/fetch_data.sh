#!/usr/bin/env bash
# Downloads the data sets that Debian does not package: MNIST (the four IDX
# .gz files) into data/mnist and CIFAR-10 (binary version, the .bin batches)
# into data/cifar10. Every download is checked against a checksum table; one
# that does not match is deleted and the script stops non-zero. Files already
# in place with the right checksum are not downloaded again.
#   scripts/fetch_data.sh [mnist] [cifar10]        (default: both)
# Environment (mirrors, tests): DATA_DIR (default: data/ of the repository),
# MNIST_BASE_URL, CIFAR10_URL, CHECKSUMS (a file of "<md5 or sha256>  <name>"
# lines, as md5sum/sha256sum print them, used instead of the table below).
set -euo pipefail

data=${DATA_DIR:-$(cd "$(dirname "$0")/.." && pwd)/data}
mnist_url=${MNIST_BASE_URL:-https://ossci-datasets.s3.amazonaws.com/mnist}
cifar_url=${CIFAR10_URL:-https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz}
mnist_files=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz
  t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)
cifar_files=(data_batch_1.bin data_batch_2.bin data_batch_3.bin data_batch_4.bin
  data_batch_5.bin test_batch.bin)

checksums() {
  if [ -n "${CHECKSUMS:-}" ]; then
    cat "$CHECKSUMS"
    return
  fi
  cat <<'EOF'
f68b3c2dcbeaaa9fbdd348bbdeb94873  train-images-idx3-ubyte.gz
d53e105ee54ea40749a09fcbcd1e9432  train-labels-idx1-ubyte.gz
9fb629c4189551a2d022fa330f9573f3  t10k-images-idx3-ubyte.gz
ec29112dd5afa0611ce80d1b7f02629c  t10k-labels-idx1-ubyte.gz
c32a1d4ab5d03f1284b67883e8d87530  cifar-10-binary.tar.gz
c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd  cifar-10-binary.tar.gz
EOF
}

die() {
  echo "fetch_data: $*" >&2
  exit 1
}

# mismatch FILE NAME: prints what is wrong when FILE does not match every
# checksum listed for NAME (or none is listed); prints nothing when it does.
mismatch() {
  local file=$1 name=$2 want entry tool got listed=""
  while read -r want entry; do
    [ "${entry#\*}" = "$name" ] || continue
    case ${#want} in
      32) tool=md5 ;;
      64) tool=sha256 ;;
      *) echo "the checksum table lists '$want' for $name: neither md5 nor sha256" && return ;;
    esac
    got=$("${tool}sum" "$file" | cut -d' ' -f1)
    [ "$got" = "$want" ] || { echo "$tool expected $want, got $got" && return; }
    listed=1
  done < <(checksums)
  [ -n "$listed" ] || echo "no checksum for it in the table"
}

download() {
  if command -v curl >/dev/null; then
    curl -fsSL --retry 3 -o "$2" "$1"
  elif command -v wget >/dev/null; then
    wget -q -O "$2" "$1"
  else
    die "neither curl nor wget is installed (scripts/setup.sh installs curl)"
  fi
}

# get URL DEST: DEST verified in place, downloaded if needed; a download that
# does not match its checksums is deleted and the script stops.
get() {
  local url=$1 dest=$2 name bad
  name=$(basename "$dest")
  if [ -f "$dest" ] && [ -z "$(mismatch "$dest" "$name")" ]; then
    echo "fetch_data: $dest already present and verified"
    return
  fi
  echo "fetch_data: $url -> $dest"
  download "$url" "$dest.part" || {
    rm -f "$dest.part"
    die "download of $url failed"
  }
  bad=$(mismatch "$dest.part" "$name")
  if [ -n "$bad" ]; then
    rm -f "$dest.part"
    die "REFUSED $name from $url: $bad (download deleted)"
  fi
  mv "$dest.part" "$dest"
}

fetch_mnist() {
  mkdir -p "$data/mnist"
  for f in "${mnist_files[@]}"; do get "$mnist_url/$f" "$data/mnist/$f"; done
}

fetch_cifar10() {
  local dir=$data/cifar10 f missing=""
  for f in "${cifar_files[@]}"; do [ -f "$dir/$f" ] || missing=1; done
  if [ -z "$missing" ]; then
    echo "fetch_data: $dir already holds the CIFAR-10 batches"
    return
  fi
  mkdir -p "$dir"
  get "$cifar_url" "$dir/cifar-10-binary.tar.gz"
  tar -xzf "$dir/cifar-10-binary.tar.gz" -C "$dir" --strip-components=1 \
    --wildcards 'cifar-10-batches-bin/*.bin'
  rm -f "$dir/cifar-10-binary.tar.gz"
  for f in "${cifar_files[@]}"; do
    [ -f "$dir/$f" ] || die "$cifar_url: the archive has no cifar-10-batches-bin/$f"
  done
}

[ -z "${CHECKSUMS:-}" ] || [ -f "$CHECKSUMS" ] || die "checksum table $CHECKSUMS not found"
[ $# -gt 0 ] || set -- mnist cifar10
for dataset in "$@"; do
  case $dataset in
    mnist) fetch_mnist ;;
    cifar10) fetch_cifar10 ;;
    *) die "unknown data set '$dataset' (mnist, cifar10)" ;;
  esac
done
echo "fetch_data: done ($*) in $data"
