# Debian's coreutils and findutils over a tree this script makes, so that every name, size, mode
# and time `ls -l` and `find` print is the script's own: mkdir -p, cp, mv, rm -r, sort, ls -l,
# find -name (with /proc, /sys and /dev pruned: they differ between kernels; find's output
# sorted: the order of a directory's entries is the file system's choice). Run from a root image
# of scripts/rootfs base, as `bash /parity/coreutils.sh` (tests/linux-parity/cases).
set -e
umask 022
t=/tmp/tree
mkdir -p $t/a/b/c $t/d
mkdir -p $t/a/b   # exists: no error
printf 'alpha\n' >$t/a/one.txt
printf 'beta beta\n' >$t/a/b/two.txt
printf '%s\n' delta charlie bravo alpha echo >$t/d/words
head -c 5000 /dev/zero >$t/d/zeros
ln -s ../a/one.txt $t/d/link
ln $t/a/one.txt $t/a/hard
chmod 600 $t/a/b/two.txt
chmod 750 $t/d
touch -h -d '2021-03-04 05:06:07' $t/d/link
find $t -exec touch -h -d '2020-01-02 03:04:05' {} +
touch -d '2021-03-04 05:06:07' $t/d/zeros
echo "== ls -l"
ls -l $t $t/a $t/d
echo "== ls -lR --time-style=full-iso"
ls -lR --time-style=full-iso $t/a
echo "== cp"
cp $t/a/one.txt $t/d/copy
touch -d '2022-05-06 07:08:09' $t/d/copy
cp -p $t/d/zeros $t/d/zeros.p
cp -r $t/a $t/acopy
cp -a $t/d $t/dcopy
ls -l --time-style=+%F.%T $t/d $t/dcopy | sed '/^total/d'
cksum $t/d/zeros $t/d/zeros.p $t/dcopy/zeros
echo "== mv"
mv $t/d/copy $t/d/moved
mv $t/acopy $t/a/inside
mv $t/a/b/two.txt $t/two.txt
ls $t $t/a $t/d
echo "== sort"
sort $t/d/words | tr '\n' ' '; echo
printf '10\n9\n100\n-1\n' | sort -n | tr '\n' ' '; echo
printf 'b 2\na 2\nc 1\n' | sort -k2,2n -k1,1 | tr '\n' ';'; echo
echo "== find"
find $t -name '*.txt' | sort
find $t -type l -printf '%p -> %l\n' | sort
find $t -size +4k -type f | sort
find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o \( -name words -o -name sort -type f -o -name 'libc.so*' \) -print | sort
echo "== rm -r"
rm -r $t/a/inside $t/dcopy
rm -rf $t/nonexistent
ls -A $t
rm -r $t
[ -e $t ] || echo "$t removed"
echo done
