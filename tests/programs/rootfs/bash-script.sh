# Debian's dynamically linked bash over the kernel's processes, pipes, files and signals:
# functions, background jobs and wait, redirections, here-documents, pipelines, command
# substitution and traps, with coreutils as the commands. Run from a root image of scripts/rootfs
# base, as `bash /parity/bash-script.sh` (tests/linux-parity/cases). Standard error goes to
# standard output where a line of it is checked.
set -u
cd /tmp
square() { echo $(( $1 * $1 )); }
greet() { local who=${1:-nobody}; printf 'hello, %s\n' "$who"; return 7; }
greet world; echo "greet status $?"
echo "squares $(square 3) $(square 12)"
count() { local n=0; while read -r _; do n=$((n + 1)); done; echo "$n lines"; }
seq 1 25 | count

# Redirections: truncate, append, read, a descriptor of its own, standard error, /dev/null.
echo first >out.txt
echo second >>out.txt
cat <out.txt
exec 4>fd4.txt; echo "to fd 4" >&4; exec 4>&-
cat fd4.txt
ls /nonexistent 2>err.txt; echo "ls status $?"
sed 's/^ls: //' err.txt
{ echo both; echo err-too >&2; } >both.txt 2>&1; cat both.txt
cat /nonexistent 2>/dev/null || echo "cat failed quietly"
read -r line <out.txt; echo "read: $line"

# Here-documents, quoted and not, with tabs stripped.
x=42
cat <<EOT
x is $x, sum $((x + 1)), cmd $(echo sub)
EOT
cat <<'EOT'
literal $x $(echo no)
EOT
cat <<-EOT
	tabbed $x
	EOT
tr a-z A-Z <<<"here string"

# Pipelines and their status.
printf '%s\n' pear apple fig apple banana | sort | uniq -c | sort -k1,1nr -k2 | head -n 3
echo "pipe status ${PIPESTATUS[*]}"
false | true; echo "last $? statuses ${PIPESTATUS[*]}"
set -o pipefail; false | true; echo "pipefail $?"; set +o pipefail
words=$(echo one two three | wc -w); echo "words $words"
nested=$(echo "$(echo "$(echo deep)")"); echo "nested $nested"

# Background jobs and wait: statuses by pid, all of them, and one killed.
(sleep 0.2; exit 3) & a=$!
(exit 4) & b=$!
wait $b; echo "b status $?"
wait $a; echo "a status $?"
for i in 1 2 3; do (echo "job $i" >job$i.txt) & done
wait; cat job1.txt job2.txt job3.txt
sleep 10 & s=$!
kill -TERM $s; wait $s; echo "killed status $?"
sleep 0.1 & wait -n; echo "wait -n status $?"

# Traps: a signal to the shell itself, a trap on a subshell's exit, ERR and RETURN-free DEBUG-free.
trap 'echo "caught USR1"' USR1
kill -USR1 $$
echo "after USR1"
( trap 'echo "subshell exit trap"' EXIT; echo "in subshell" )
trap 'echo "err trap on: $BASH_COMMAND"' ERR
false
trap - ERR
trap 'echo "exit trap, status $?"' EXIT
rm -f out.txt fd4.txt err.txt both.txt job1.txt job2.txt job3.txt
exit 6
