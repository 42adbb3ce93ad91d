/* The pod sandbox's process: it holds the pod's namespaces and does nothing else. It ends on SIGINT or
 * SIGTERM (the runtime stopping the sandbox) and, as PID 1 of a pod that shares its process namespace,
 * reaps the zombies that are re-parented to it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) { _exit(sig == SIGTERM ? 0 : 128 + sig); }

static void on_child(int sig) {
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0) {
	}
}

int main(int argc, char **argv) {
	if (argc > 1 && strcmp(argv[1], "-v") == 0) {
		puts("kpng pause");
		return 0;
	}
	if (getpid() != 1) fputs("pause: warning: not PID 1\n", stderr);
	struct sigaction stop = {.sa_handler = on_stop}, child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP};
	if (sigaction(SIGINT, &stop, NULL) < 0 || sigaction(SIGTERM, &stop, NULL) < 0 || sigaction(SIGCHLD, &child, NULL) < 0) {
		perror("pause: sigaction");
		return 1;
	}
	for (;;) pause();
}
