#!/usr/bin/env bash
# cluster-generic status command for SLURM: prints running, success or failed for the job id $1.
# squeue knows jobs until MinJobAge after their end; sacct (where accounting is on) knows them later.
state=$(squeue --noheader --states=all --jobs "$1" --format=%T 2>/dev/null | head -n 1)
[ -n "$state" ] || state=$(sacct --noheader --allocations --parsable2 --jobs "$1" --format=State 2>/dev/null | head -n 1)
case "${state%% *}" in
  COMPLETED) echo success ;;
  "" | PENDING | CONFIGURING | RUNNING | COMPLETING | SUSPENDED | REQUEUED | RESIZING) echo running ;;
  *) echo failed ;;
esac
