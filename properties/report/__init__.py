"""What a run leaves behind: statistics, the campaign report, repro scripts."""
