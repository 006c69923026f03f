#!/bin/bash
# Builds qemu-system-xtensa with an imported `esp32s3` core (Espressif's ISA description from the
# xtensa-overlays repository) plus our implementation of the PIE instructions the kernels use
# (pie_ops.c.inc), outside the repository. Debian 12 sources only; no network besides deb.debian.org.
#   tools/esp32s3-qemu/build.sh WORK OVERLAY_GIT [QEMU_ORIG_TARBALL]
# WORK: scratch folder; OVERLAY_GIT: git dir of github.com/espressif/xtensa-overlays;
# QEMU_ORIG_TARBALL: qemu_7.2+dfsg.orig.tar.xz (else fetched with `apt-get source --download-only qemu`
# from a deb-src list for bookworm). Result: WORK/qemu-build/qemu-system-xtensa (-M sim -cpu esp32s3).
# PREPARE_ONLY=1 stops after preparing the source tree. About 25 minutes with -j2 (JOBS=N to change).
# Build dependencies (apt): ninja-build meson pkg-config libglib2.0-dev libpixman-1-dev flex bison python3-venv
set -euo pipefail
WORK=$(realpath -m "$1"); OVERLAY_GIT=$(realpath "$2"); ORIG=${3:-}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$WORK"; cd "$WORK"
if [ -z "$ORIG" ]; then
  printf 'deb-src http://deb.debian.org/debian bookworm main\ndeb-src http://deb.debian.org/debian-security bookworm-security main\n' > src.list
  # A private apt state dir so that the system's package lists are not replaced by this deb-src list.
  mkdir -p apt/lists/partial apt/cache/archives/partial
  APT=(-o Dir::Etc::SourceList="$WORK/src.list" -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists="$WORK/apt/lists" -o Dir::Cache="$WORK/apt/cache")
  apt-get "${APT[@]}" update
  apt-get "${APT[@]}" source --download-only qemu
  ORIG=$(ls "$WORK"/qemu_7.2*.orig.tar.xz | head -1)
fi
rm -rf qemu-7.2.0 && tar xf "$ORIG"
Q="$WORK/qemu-7.2.0"
# The overlay tarball in the layout QEMU's import_core.sh expects.
rm -rf overlay && mkdir -p overlay/xtensa/config overlay/gdb overlay/binutils
S=xtensa_esp32s3
git --git-dir="$OVERLAY_GIT" show HEAD:$S/newlib/newlib/libc/sys/xtensa/include/xtensa/config/core-isa.h > overlay/xtensa/config/core-isa.h
cp "$HERE/core-matmap.h" overlay/xtensa/config/core-matmap.h
git --git-dir="$OVERLAY_GIT" show HEAD:$S/gdb/gdb/xtensa-config.c > overlay/gdb/xtensa-config.c
git --git-dir="$OVERLAY_GIT" show HEAD:$S/binutils/bfd/xtensa-modules.c > overlay/binutils/xtensa-modules.c
tar czf overlay.tar.gz -C overlay xtensa gdb binutils
# 40 MHz core clock as QEMU's other cores: with -icount shift=0 CCOUNT = executed instructions / 25.
(cd "$Q/target/xtensa" && bash ./import_core.sh "$WORK/overlay.tar.gz" esp32s3 40000)
# The sim board's memory map of de233_fpu (RAM at 0, ROM and the reset vector at 0xfe000000), so
# that the route-3 board runner (targets/xtensa-lx7, linked for de233_fpu) runs unchanged; the
# overlay's generic map (instruction / data RAM at 0x40000000 / 0x3c000000, kept) is not the chip's
# either. The memory map changes no instruction's semantics.
cat >> "$Q/target/xtensa/core-esp32s3/core-isa.h" <<'MAP'
/* tools/esp32s3-qemu/build.sh: de233_fpu's sim memory map */
#undef XCHAL_RESET_VECTOR0_VADDR
#undef XCHAL_RESET_VECTOR0_PADDR
#define XCHAL_RESET_VECTOR0_VADDR 0xFE000000
#define XCHAL_RESET_VECTOR0_PADDR 0xFE000000
#define XCHAL_SYSROM0_PADDR 0xfe000000
#define XCHAL_SYSROM0_SIZE  0x02000000
#define XCHAL_SYSRAM0_PADDR 0x00000000
#define XCHAL_SYSRAM0_SIZE  0x08000000
MAP
# Our PIE subset: state in CPUXtensaState, helpers, translators, and the core's translator list.
cp "$HERE/pie_ops.c.inc" "$Q/target/xtensa/"
cd "$Q" && patch -p1 < "$HERE/qemu-pie.patch" && cd "$WORK"
sed -i 's|^    .isa_internal = &xtensa_modules,|&\n    .opcode_translators = (const XtensaOpcodeTranslators *[]){\n        \&xtensa_core_opcodes, \&xtensa_fpu_opcodes, \&xtensa_pie_opcodes, NULL,\n    },|' "$Q/target/xtensa/core-esp32s3.c"
[ "${PREPARE_ONLY:-0}" = 1 ] && { echo "prepared: $Q"; exit 0; }
mkdir -p qemu-build && cd qemu-build
[ -f build.ninja ] || "$Q/configure" --target-list=xtensa-softmmu --disable-docs --disable-werror \
  --without-default-features --disable-install-blobs --disable-tools --disable-guest-agent --disable-slirp --disable-fdt
ninja -j"${JOBS:-2}" qemu-system-xtensa
echo "built: $WORK/qemu-build/qemu-system-xtensa"
