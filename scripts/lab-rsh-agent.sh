#!/bin/sh
# Open MPI's rsh agent for a `rocast lab` (`mpirun --mca plm_rsh_agent THIS`): Open MPI
# calls `THIS HOST CMD…` for each host's daemon; HOST is 10.77.0.(i+1), run in namespace
# rocast-$ROCAST_LAB_NAME-h<i> (ROCAST_LAB_NAME: the lab's name, default "lab"). The
# namespaces share /tmp and the hostname: each daemon gets a session directory of its own
# (two daemons creating the same one race, and one fails to start), which the caller
# removes afterwards (/tmp/rocast-ompi-h<i+1>).
host=$1; shift
i=${host##*.}
mkdir -p "/tmp/rocast-ompi-h$i"
exec ip netns exec "rocast-${ROCAST_LAB_NAME:-lab}-h$((i-1))" env OMPI_MCA_orte_tmpdir_base="/tmp/rocast-ompi-h$i" sh -c "$*"
