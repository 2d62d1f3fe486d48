# Shared by benches/http/cpu.sh and benches/http/front_cpu.sh (sourced): CPU
# clock ticks (user + system) of process $1, the whole process (threads
# that exited included), then per thread name. The fields after the
# `(comm)` part are counted from its closing parenthesis, so a name with
# spaces cannot shift them (proc(5): utime and stime are fields 14 and 15).
ticks() {
  printf 'process %s\n' "$(sed 's/.*) //' /proc/"$1"/stat | awk '{print $12 + $13}')"
  for t in /proc/"$1"/task/*; do
    printf '%s %s\n' "$(tr -d ' ' <"$t/comm")" "$(sed 's/.*) //' "$t/stat" | awk '{print $12 + $13}')"
  done | awk '{a[$1] += $2} END {for (k in a) print k, a[k]}'
}
