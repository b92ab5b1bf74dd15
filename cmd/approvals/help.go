package main

import "strings"

// wantsHelp says whether a command's arguments ask for its usage: -h, -help
// or --help anywhere before a "--". Checked before the command runs, so
// `tools check --help` never opens a file named --help and `serve --help`
// never starts a server (a file of that name is still ./--help).
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// commandUsage is the usage of command cmd: its entries in the overall
// usage (each entry with its continuation lines), and for serve the
// configuration too. An unknown command gets the whole usage.
func commandUsage(cmd string) string {
	head, config, _ := strings.Cut(usage, "\n\nConfiguration")
	var b strings.Builder
	keep := false
	for _, line := range strings.Split(head, "\n") {
		switch {
		case strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   "):
			keep = strings.Fields(line)[0] == cmd
			if keep {
				lead := "       approvals "
				if b.Len() == 0 {
					lead = "usage: approvals "
				}
				line = lead + strings.TrimPrefix(line, "  ")
			}
		case strings.HasPrefix(line, "   "):
			// a continuation of the entry above, kept under its description
			line = strings.Repeat(" ", len("usage: approvals ")-2) + line
		default:
			keep = false
		}
		if keep {
			b.WriteString(line + "\n")
		}
	}
	if b.Len() == 0 {
		return usage
	}
	out := b.String()
	if cmd == "serve" {
		out += "\nConfiguration" + config
	}
	return out
}
