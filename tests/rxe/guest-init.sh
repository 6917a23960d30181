#!/bin/busybox sh
# SPDX-License-Identifier: MIT
# /init of the rxe guest: mount the host's root read-only and the build directory
# read-write at its own path, run command.sh there, record its status, power off.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules.order); do insmod "$m"; done

job=$(sed -n 's/.*job=\([^ ]*\).*/\1/p' /proc/cmdline)
work=$(sed -n 's/.*work=\([^ ]*\).*/\1/p' /proc/cmdline)
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,ro,cache=loose hostroot /newroot
for d in tmp run var/tmp var/log root mnt; do mount -t tmpfs tmpfs "/newroot/$d"; done
mount -t proc proc /newroot/proc
mount -t sysfs sys /newroot/sys
mount -t devtmpfs dev /newroot/dev
mkdir -p /newroot/dev/pts /newroot/dev/shm
# What udev would add: bash's <(...) needs /dev/fd (without it, it fails quietly).
ln -s /proc/self/fd /newroot/dev/fd
ln -s /proc/self/fd/0 /newroot/dev/stdin
ln -s /proc/self/fd/1 /newroot/dev/stdout
ln -s /proc/self/fd/2 /newroot/dev/stderr
mount -t devpts devpts /newroot/dev/pts
mount -t tmpfs tmpfs /newroot/dev/shm
mkdir -p "/newroot$job"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,rw,cache=none job "/newroot$job"

# The kernel loads modules through the host's modprobe.
printf '#!/bin/sh\nexec chroot /newroot /sbin/modprobe "$@"\n' > /modprobe
chmod +x /modprobe
echo /modprobe > /proc/sys/kernel/modprobe

out="/newroot$job/$work"
chroot /newroot /bin/sh -c "ulimit -l unlimited; export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root; bash $job/$work/command.sh" > "$out/output.log" 2>&1
echo $? > "$out/status"
sync
poweroff -f
